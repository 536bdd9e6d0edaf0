//! Sender domains (API.md section 11): bare records and a bare list object.
//!
//! The slow parts happen here, before the project's actor is involved: the DKIM key
//! pair is generated on a blocking thread, and DNS is asked on the resolver's runtime.
//! The actor only checks and writes, and answers once the write is durable.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::domains::{Domain, DomainName, DomainStatus, RecordPolicy};
use mailroom_actors::model::DomainId;
use mailroom_actors::Resource;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::error::ApiError;
use super::validate::{path_id, Query};
use super::AppState;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainView {
    pub id: String,
    /// The ASCII form (IDN names are stored as punycode).
    pub domain: String,
    /// PENDING, VERIFIED or FAILED.
    pub status: &'static str,
    pub verified: bool,
    pub records: Vec<RecordView>,
    pub created_at: String,
    /// When the domain became VERIFIED; null while it is not.
    pub verified_at: Option<String>,
    /// The last DNS check, by request or by the background re-check.
    pub last_checked_at: Option<String>,
    /// Marked verified by the operator without DNS (`mailroom domain trust`); stays
    /// VERIFIED whatever the checks find.
    pub trusted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecordView {
    /// TXT, or CNAME for the return-path host.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub value: String,
    /// OWNERSHIP, DKIM, SPF, DMARC, or RETURN_PATH (only when the server has
    /// `feedback.return_path_domain`). SPF, DMARC and RETURN_PATH are advice and do not
    /// decide the status; a verified RETURN_PATH moves the envelope sender under it.
    pub purpose: &'static str,
    pub verified: bool,
}

impl DomainView {
    pub fn new(d: &Domain, policy: &RecordPolicy) -> Self {
        DomainView {
            id: d.id.to_string(),
            domain: d.name.to_string(),
            status: d.status.as_str(),
            verified: d.is_verified(),
            records: d
                .records(policy)
                .into_iter()
                .map(|r| RecordView {
                    kind: r.kind,
                    name: r.name,
                    value: r.value,
                    purpose: r.purpose.as_str(),
                    verified: r.verified,
                })
                .collect(),
            created_at: d.created_at.to_iso(),
            verified_at: d.verified_at.map(|t| t.to_iso()),
            last_checked_at: d.checked_at.map(|t| t.to_iso()),
            trusted: d.trusted,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DomainList {
    pub domains: Vec<DomainView>,
    pub cursor: Option<String>,
    #[serde(rename = "hasMore")]
    pub has_more: bool,
    pub total: u64,
}

/// Request body of POST /domains.
#[derive(Deserialize, ToSchema)]
pub struct CreateDomainRequest {
    pub domain: DomainName,
}

#[utoipa::path(get, path = "/domains", tag = "Domains",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"),
           ("cursor" = Option<String>, Query),
           ("status" = Option<String>, Query, description = "PENDING, VERIFIED or FAILED")),
    responses((status = 200, body = DomainList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let status = q.opt_enum(
        "status",
        "'PENDING' | 'VERIFIED' | 'FAILED'",
        DomainStatus::parse,
    )?;
    let page = state.engine.domains().list(p.id, status, page).await?;
    Ok(HttpResponse::Ok().json(DomainList {
        domains: page
            .items
            .iter()
            .map(|d| DomainView::new(d, state.engine.domains().policy()))
            .collect(),
        has_more: page.has_more(),
        cursor: page.next_cursor,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/domains", tag = "Domains", request_body = CreateDomainRequest,
    responses((status = 201, body = DomainView), (status = 409, description = "already added"),
              (status = 422, description = "not a valid domain name")),
    security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(CreateDomainRequest { domain: name }): Body<CreateDomainRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let created = state.engine.domains().add(p.id, name).await?;
    Ok(HttpResponse::Created().json(DomainView::new(&created, state.engine.domains().policy())))
}

#[utoipa::path(get, path = "/domains/{id}", tag = "Domains",
    responses((status = 200, body = DomainView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: DomainId = path_id(&id, Resource::Domain)?;
    let d = state.engine.domains().get(p.id, id)?;
    Ok(HttpResponse::Ok().json(DomainView::new(&d, state.engine.domains().policy())))
}

#[utoipa::path(delete, path = "/domains/{id}", tag = "Domains",
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: DomainId = path_id(&id, Resource::Domain)?;
    state.engine.domains().delete(p.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Checks the records in DNS now (bypassing the cache) and answers with the record.
#[utoipa::path(post, path = "/domains/{id}/verify", tag = "Domains",
    responses((status = 200, body = DomainView, description = "the record after the check; `verified` says whether it passed"),
              (status = 404)),
    security(("bearer" = [])))]
pub async fn verify(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: DomainId = path_id(&id, Resource::Domain)?;
    let updated = state.engine.domains().check_now(p.id, id).await?;
    Ok(HttpResponse::Ok().json(DomainView::new(&updated, state.engine.domains().policy())))
}
