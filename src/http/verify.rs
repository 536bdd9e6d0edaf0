//! POST /v1/verify (API.md section 7): `{success: true, data: <verification result>}`.
//! A string that is not shaped like an address at all is a 422; anything address-shaped
//! gets a result, whose `reasons` explain each negative finding. DNS trouble is a
//! reason too, never a 5xx.

use actix_web::{web, HttpResponse};

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::state::AppState;

use crate::api::verify::{AddressShaped, VerifyEnvelope, VerifyRequest};

#[utoipa::path(post, path = "/v1/verify", tag = "Public", request_body = VerifyRequest,
    responses((status = 200, body = VerifyEnvelope),
              (status = 422, description = "email is missing, not a string, or not an address at all")),
    security(("bearer" = [])))]
pub async fn verify(
    SecretKey(_p): SecretKey,
    Body(VerifyRequest {
        email: AddressShaped(address),
    }): Body<VerifyRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let result = state.engine.email_verifier().verify(&address).await;
    Ok(HttpResponse::Ok().json(VerifyEnvelope {
        success: true,
        data: result.into(),
    }))
}
