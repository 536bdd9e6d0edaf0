//! Bulk contacts: a CSV import that runs in the background, its progress, and the CSV
//! export (streamed by `crate::contacts_csv`).

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::model::ImportId;
use mailroom_actors::{Error, FieldCode, Resource};

use super::auth::SecretKey;
use crate::api::body::read_within;
use crate::api::error::ApiError;
use crate::api::validate::path_id;
use crate::state::AppState;

use crate::api::contacts_bulk::ImportView;
#[utoipa::path(post, path = "/contacts/import", tag = "Contacts",
    request_body(content = String, content_type = "text/csv",
        description = "A header row with `email` (required), `subscribed`, `data` (a JSON object) and data columns typed by a suffix: `age:number`, `vip:boolean`, `plan:string` (the default)"),
    responses((status = 202, description = "stored; importing in the background", body = ImportView),
              (status = 409, description = "limits.max_running_imports imports are under way"),
              (status = 413, description = "larger than limits.max_import_bytes"),
              (status = 422, description = "not text/csv, or a header without email")),
    security(("bearer" = [])))]
pub async fn import(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let csv = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("text/csv"));
    if !csv {
        return Err(Error::field(
            "Content-Type",
            FieldCode::InvalidEnumValue,
            "An import is sent as text/csv",
        )
        .into());
    }
    let mut payload = payload.into_inner();
    let body = read_within(&req, &mut payload, state.limits.max_import_bytes).await?;
    let import = state
        .engine
        .contacts()
        .import(p.id, body.into(), state.limits.max_running_imports)
        .await?;
    Ok(HttpResponse::Accepted().json(ImportView::from(&import)))
}

#[utoipa::path(get, path = "/contacts/imports/{id}", tag = "Contacts",
    responses((status = 200, body = ImportView), (status = 404)), security(("bearer" = [])))]
pub async fn get_import(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ImportId = path_id(&id, Resource::Import)?;
    let found = state.engine.contacts().get_import(p.id, id)?;
    Ok(HttpResponse::Ok().json(ImportView::from(&found)))
}

#[utoipa::path(get, path = "/contacts/export", tag = "Contacts",
    params(("segmentId" = Option<String>, Query, description = "only this segment's members")),
    responses((status = 200, description = "CSV: email, subscribed, createdAt, data (a JSON object)", content_type = "text/csv", body = String),
              (status = 404, description = "no such segment")),
    security(("bearer" = [])))]
pub async fn export(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    crate::contacts_csv::respond(p.id, req, state).await
}
