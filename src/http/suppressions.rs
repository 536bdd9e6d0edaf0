//! The suppression list (API.md 28), secret key only: bare records and a bare list
//! object, as the contact endpoints answer.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::suppressions::{parse_reason, Imported, Reason, Suppression};
use mailroom_actors::model::{EmailAddress, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::error::ApiError;
use super::validate::Query;
use super::AppState;

/// One address on the list.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionView {
    /// The address; null once its contact was deleted (then `emailHash` still matches).
    pub email: Option<String>,
    /// SHA-256 (hex) of the address in lower case.
    pub email_hash: String,
    /// hard_bounce, soft_bounce, complaint or manual.
    pub reason: &'static str,
    /// The email whose report put the address here.
    pub email_id: Option<String>,
    pub created_at: String,
    /// When a soft-bounce suppression lifts; null: it stays until removed.
    pub expires_at: Option<String>,
}

impl SuppressionView {
    pub fn new(s: &Suppression) -> Self {
        SuppressionView {
            email: s.email.clone(),
            email_hash: s.hash_hex(),
            reason: s.reason.as_str(),
            email_id: s.email_id.clone(),
            created_at: Timestamp::from(s.created_at).to_iso(),
            expires_at: s.expires_at.map(|at| Timestamp::from(at).to_iso()),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SuppressionList {
    pub suppressions: Vec<SuppressionView>,
    pub cursor: Option<String>,
    #[serde(rename = "hasMore")]
    pub has_more: bool,
    pub total: u64,
}

/// Why an address is on the list (`?reason=` takes one).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SuppressionReason {
    HardBounce,
    SoftBounce,
    Complaint,
    Manual,
}

/// The one reason a tenant gives by hand; the others come from delivery reports.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManualReason {
    Manual,
}

/// Request body of POST /suppressions.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddSuppressionRequest {
    email: EmailAddress,
    /// `manual`, the default.
    #[serde(default)]
    #[allow(dead_code)]
    reason: Option<ManualReason>,
}

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
    Ok(HttpResponse::Ok().json(SuppressionList {
        has_more: page.has_more(),
        suppressions: page.items.iter().map(SuppressionView::new).collect(),
        cursor: page.next_cursor,
        total: page.total,
    }))
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

/// What an import made of the file.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportResult {
    pub added: u64,
    /// Addresses on the list already (kept as they were).
    pub existing: u64,
    /// Rows that name no valid address.
    pub invalid: Vec<InvalidRow>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InvalidRow {
    /// The row's number in the file, the header being 1.
    pub row: u64,
    pub error: String,
}

impl From<Imported> for ImportResult {
    fn from(i: Imported) -> Self {
        ImportResult {
            added: i.added,
            existing: i.existing,
            invalid: i
                .invalid
                .into_iter()
                .map(|(row, error)| InvalidRow { row, error })
                .collect(),
        }
    }
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
    let raw = super::body::raw(&req, &mut payload.into_inner()).await?;
    let text = String::from_utf8(raw.to_vec())
        .map_err(|_| ApiError::BadRequest("The CSV is not UTF-8 text".into()))?;
    let done = state.engine.suppressions().import(p.id, text).await?;
    Ok(HttpResponse::Ok().json(ImportResult::from(done)))
}
