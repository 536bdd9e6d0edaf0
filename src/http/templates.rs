//! The five template endpoints (API.md section 4). Bare records and a bare list object
//! with `page`, `pageSize` and `totalPages` beside the cursor fields.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::templates::{
    NewTemplate, TemplateFilter, TemplateKind, TemplatePatch,
};
use mailroom_actors::model::TemplateId;
use mailroom_actors::Resource;

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::api::validate::{path_id, Query};
use crate::api::wire::{DisplayName, Text};
use crate::state::AppState;

use crate::api::templates::{
    CreateTemplateRequest, TemplateList, TemplateView, UpdateTemplateRequest,
};
impl From<UpdateTemplateRequest> for TemplatePatch {
    fn from(r: UpdateTemplateRequest) -> Self {
        TemplatePatch {
            name: r.name.map(Text::into_string),
            description: r.description.map(Text::into_string),
            subject: r.subject.map(Text::into_string),
            body: r.body.map(Text::into_string),
            text: r.text.map(Text::into_string),
            kind: r.kind,
            from: r.from,
            from_name: r.from_name.map(DisplayName::into_string),
            reply_to: r.reply_to,
        }
    }
}

#[utoipa::path(post, path = "/templates", tag = "Templates", request_body = CreateTemplateRequest,
    responses((status = 201, body = TemplateView), (status = 422)), security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(req): Body<CreateTemplateRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let t = state.engine.templates().create(p.id, req.into()).await?;
    Ok(HttpResponse::Created().json(TemplateView::from(&t)))
}

impl From<CreateTemplateRequest> for NewTemplate {
    fn from(req: CreateTemplateRequest) -> Self {
        NewTemplate {
            name: req.name.into_string(),
            description: req.description.map(Text::into_string),
            subject: req.subject.into_string(),
            body: req.body.into_string(),
            text: req.text.map(Text::into_string),
            kind: req.kind.unwrap_or(TemplateKind::Transactional),
            from: req.from,
            from_name: req.from_name.map(DisplayName::into_string),
            reply_to: req.reply_to,
        }
    }
}

#[utoipa::path(get, path = "/templates", tag = "Templates",
    params(("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query),
           ("type" = Option<String>, Query, description = "TRANSACTIONAL or MARKETING"),
           ("search" = Option<String>, Query, description = "substring of the name")),
    responses((status = 200, body = TemplateList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let kind = q.opt_enum("type", "'TRANSACTIONAL' | 'MARKETING'", TemplateKind::parse)?;
    let filter = TemplateFilter {
        kind,
        search: q.get("search").map(str::to_owned),
    };
    let limit = page.limit();
    let (page, before) = state.engine.templates().list(p.id, filter, page).await?;
    let page = page.map(|t| TemplateView::from(&t));
    Ok(HttpResponse::Ok().json(TemplateList::of(page, before, limit)))
}

#[utoipa::path(get, path = "/templates/{id}", tag = "Templates",
    responses((status = 200, body = TemplateView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: TemplateId = path_id(&id, Resource::Template)?;
    let t = state.engine.templates().get(p.id, id)?;
    Ok(HttpResponse::Ok().json(TemplateView::from(&t)))
}

#[utoipa::path(patch, path = "/templates/{id}", tag = "Templates", request_body = UpdateTemplateRequest,
    responses((status = 200, body = TemplateView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(req): Body<UpdateTemplateRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: TemplateId = path_id(&id, Resource::Template)?;
    let t = state
        .engine
        .templates()
        .update(p.id, id, req.into())
        .await?;
    Ok(HttpResponse::Ok().json(TemplateView::from(&t)))
}

#[utoipa::path(delete, path = "/templates/{id}", tag = "Templates",
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: TemplateId = path_id(&id, Resource::Template)?;
    state.engine.templates().delete(p.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}
