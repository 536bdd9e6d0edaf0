//! Bulk contacts: a CSV import that runs in the background, its progress, and the CSV
//! export (streamed by `crate::contacts_csv`).

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::contacts::Import;
use mailroom_actors::model::{ImportId, Timestamp};
use mailroom_actors::{Error, FieldCode, Resource};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::read_within;
use super::error::ApiError;
use super::validate::path_id;
use super::AppState;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectedRow {
    /// The CSV line the row starts on; the header is line 1.
    pub line: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportView {
    pub id: String,
    /// QUEUED, RUNNING, COMPLETED or FAILED.
    pub status: String,
    /// Data rows in the file.
    pub rows: u64,
    pub processed: u64,
    pub created: u64,
    pub updated: u64,
    /// The first 1,000 rejected rows.
    pub rejected: Vec<RejectedRow>,
    /// Rejected rows past those listed.
    pub rejected_unlisted: u64,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub error: Option<String>,
}

impl From<&Import> for ImportView {
    fn from(i: &Import) -> Self {
        let iso = |ms: i64| Timestamp::from(ms).to_iso();
        ImportView {
            id: i.id.to_string(),
            status: i.status.as_str().into(),
            rows: i.rows,
            processed: i.processed,
            created: i.created,
            updated: i.updated,
            rejected: i
                .rejected
                .iter()
                .map(|r| RejectedRow {
                    line: r.line,
                    email: r.email.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
            rejected_unlisted: i.rejected_unlisted,
            created_at: iso(i.created_at),
            finished_at: i.finished_at.map(iso),
            error: i.error.clone(),
        }
    }
}

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
