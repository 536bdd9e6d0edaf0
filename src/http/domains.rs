//! Sender domains (API.md section 11): bare records and a bare list object.
//!
//! The slow parts happen here, before the project's actor is involved: the DKIM key
//! pair is generated on a blocking thread, and DNS is asked on the resolver's runtime.
//! The actor only checks and writes, and answers once the write is durable.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::domains::DomainStatus;
use mailroom_actors::model::DomainId;
use mailroom_actors::Resource;

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::api::validate::{path_id, Query};
use crate::state::AppState;

use crate::api::domains::{CreateDomainRequest, DomainList, DomainView};
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
    let domains = state.engine.domains();
    let page = page.map(|d| DomainView::new(&d, domains.policy()));
    Ok(HttpResponse::Ok().json(DomainList::from(page)))
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
