//! The suppression list (API.md 28), secret key only: bare records and a bare list
//! object, as the contact endpoints answer.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::suppressions::{parse_reason, Reason};

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::api::validate::Query;
use crate::state::AppState;

use crate::api::suppressions::{
    AddSuppressionRequest, ImportResult, SuppressionList, SuppressionReason, SuppressionView,
};
#[utoipa::path(get, path = "/suppressions", tag = "Suppressions",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query),
           ("reason" = Option<SuppressionReason>, Query)),
    responses((status = 200, body = SuppressionList), (status = 422)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let reason = match q.get("reason").filter(|r| !r.is_empty()) {
        Some(raw) => Some(parse_reason(raw)?),
        None => None,
    };
    let page = state.engine.suppressions().list(p.id, reason, page).await?;
    let page = page.map(|s| SuppressionView::new(&s));
    Ok(HttpResponse::Ok().json(SuppressionList::from(page)))
}

#[utoipa::path(post, path = "/suppressions", tag = "Suppressions", request_body = AddSuppressionRequest,
    responses((status = 201, body = SuppressionView), (status = 200, body = SuppressionView, description = "the address was on the list already"),
              (status = 422)), security(("bearer" = [])))]
pub async fn add(
    SecretKey(p): SecretKey,
    Body(req): Body<AddSuppressionRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (s, new) = state
        .engine
        .suppressions()
        .add(p.id, req.email, Reason::Manual)
        .await?;
    let view = SuppressionView::new(&s);
    Ok(if new {
        HttpResponse::Created().json(view)
    } else {
        HttpResponse::Ok().json(view)
    })
}

#[utoipa::path(delete, path = "/suppressions/{email}", tag = "Suppressions",
    params(("email" = String, Path, description = "The address (URL-encoded)")),
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn remove(
    SecretKey(p): SecretKey,
    email: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    state
        .engine
        .suppressions()
        .remove(p.id, email.into_inner())
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(post, path = "/suppressions/import", tag = "Suppressions",
    request_body(content = String, description = "CSV with a header row: an `email` column, and an optional `reason` column", content_type = "text/csv"),
    responses((status = 200, body = ImportResult), (status = 413), (status = 422)), security(("bearer" = [])))]
pub async fn import(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let raw = crate::api::body::raw(&req, &mut payload.into_inner()).await?;
    let text = String::from_utf8(raw.to_vec())
        .map_err(|_| ApiError::BadRequest("The CSV is not UTF-8 text".into()))?;
    let done = state.engine.suppressions().import(p.id, text).await?;
    Ok(HttpResponse::Ok().json(ImportResult::from(done)))
}
