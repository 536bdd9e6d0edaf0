//! The eight segment endpoints (API.md section 8). Bare records and bare list objects.
//! `memberCount` is computed when the record is read, so it is exact.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::segments::UpdateSegment;
use mailroom_actors::model::SegmentId;
use mailroom_actors::Resource;

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::contacts::{ContactList, ContactView};
use crate::api::error::ApiError;
use crate::api::validate::{path_id, reject_any, Query};
use crate::state::AppState;

use crate::api::segments::{
    filters, views, CreateSegmentRequest, MembersAdded, MembersRemoved, MembersRequest,
    SegmentList, SegmentView, UpdateSegmentRequest,
};
#[utoipa::path(get, path = "/segments", tag = "Segments",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = SegmentList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let page = state.engine.segments().list(p.id, page).await?;
    let mut page = page;
    let segments = std::mem::take(&mut page.items);
    let segments = views(state.engine.segments().counted(p.id, segments).await?);
    Ok(HttpResponse::Ok().json(SegmentList::from(page.with_items(segments))))
}

#[utoipa::path(post, path = "/segments", tag = "Segments", request_body = CreateSegmentRequest,
    responses((status = 201, body = SegmentView), (status = 422)), security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(req): Body<CreateSegmentRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let new = req.into_new(state.limits.max_data_bytes)?;
    let (s, n) = state.engine.segments().create(p.id, new).await?;
    Ok(HttpResponse::Created().json(SegmentView::new(&s, n)))
}

#[utoipa::path(get, path = "/segments/{id}", tag = "Segments",
    responses((status = 200, body = SegmentView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let segment = state.engine.segments().get(p.id, id)?;
    let (s, n) = state.engine.segments().counted_one(p.id, segment).await?;
    Ok(HttpResponse::Ok().json(SegmentView::new(&s, n)))
}

#[utoipa::path(patch, path = "/segments/{id}", tag = "Segments", request_body = UpdateSegmentRequest,
    responses((status = 200, body = SegmentView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(req): Body<UpdateSegmentRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let mut errors = Vec::new();
    let filters = req
        .filters
        .as_ref()
        .and_then(|doc| filters(doc, state.limits.max_data_bytes, &mut errors));
    reject_any(errors)?;
    let msg = UpdateSegment {
        id,
        name: req.name.map(|n| n.0),
        description: req.description.map(|d| Some(d.into_string())),
        filters,
        track_membership: req.track_membership,
    };
    let (s, n) = state.engine.segments().update(p.id, msg).await?;
    Ok(HttpResponse::Ok().json(SegmentView::new(&s, n)))
}

#[utoipa::path(delete, path = "/segments/{id}", tag = "Segments",
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    state.engine.segments().delete(p.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/segments/{id}/contacts", tag = "Segments",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = ContactList), (status = 404)), security(("bearer" = [])))]
pub async fn contacts(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let page = state.engine.segments().contacts(p.id, id, page).await?;
    let page = page.map(|c| ContactView::from(&c));
    Ok(HttpResponse::Ok().json(ContactList::from(page)))
}

#[utoipa::path(post, path = "/segments/{id}/members", tag = "Segments", request_body = MembersRequest,
    responses((status = 200, body = MembersAdded), (status = 404), (status = 409, description = "a DYNAMIC segment")),
    security(("bearer" = [])))]
pub async fn add_members(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(MembersRequest { emails }): Body<MembersRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let emails = emails.0;
    let out = state
        .engine
        .segments()
        .change_members(p.id, id, emails, true)
        .await?;
    Ok(HttpResponse::Ok().json(MembersAdded {
        added: out.changed,
        not_found: out.not_found,
    }))
}

#[utoipa::path(delete, path = "/segments/{id}/members", tag = "Segments", request_body = MembersRequest,
    responses((status = 200, body = MembersRemoved), (status = 404), (status = 409, description = "a DYNAMIC segment")),
    security(("bearer" = [])))]
pub async fn remove_members(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(MembersRequest { emails }): Body<MembersRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let emails = emails.0;
    let out = state
        .engine
        .segments()
        .change_members(p.id, id, emails, false)
        .await?;
    Ok(HttpResponse::Ok().json(MembersRemoved {
        removed: out.changed,
        not_found: out.not_found,
    }))
}
