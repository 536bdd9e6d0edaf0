//! The JSON body extractor: enforces `limits.max_body_bytes` (413) while reading, and
//! turns anything that is not JSON into 400 BAD_REQUEST. Type checks happen later,
//! field by field (see `validate`), so that a 422 can list every problem at once.

use actix_web::dev::Payload;
use actix_web::http::header::CONTENT_LENGTH;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use serde_json::Value;

use super::error::ApiError;
use super::AppState;

pub struct JsonBody(pub Value);

impl FromRequest for JsonBody {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let limit = req
            .app_data::<web::Data<AppState>>()
            .map_or(1 << 20, |s| s.limits.max_body_bytes);
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut payload = payload.take();
        Box::pin(async move {
            if declared.is_some_and(|n| n > limit) {
                return Err(ApiError::PayloadTooLarge { limit });
            }
            let mut buf = web::BytesMut::with_capacity(declared.unwrap_or(0).min(limit));
            while let Some(chunk) = payload.next().await {
                let chunk = chunk
                    .map_err(|e| ApiError::BadRequest(format!("Could not read the body: {e}")))?;
                if buf.len() + chunk.len() > limit {
                    return Err(ApiError::PayloadTooLarge { limit });
                }
                buf.extend_from_slice(&chunk);
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                return Err(ApiError::BadRequest(
                    "The request body is empty; a JSON object is expected".into(),
                ));
            }
            // serde_json stops at 128 levels of nesting, so deep input cannot exhaust the stack.
            serde_json::from_slice(&buf)
                .map(JsonBody)
                .map_err(|e| ApiError::BadRequest(format!("The body is not valid JSON: {e}")))
        })
    }
}
