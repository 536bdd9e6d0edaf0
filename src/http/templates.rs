//! The five template endpoints (API.md section 4). Bare records and a bare list object
//! with `page`, `pageSize` and `totalPages` beside the cursor fields.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::templates::{NewTemplate, Template, TemplateKind, TemplatePatch};
use mailroom_actors::model::{EmailAddress, TemplateId};
use mailroom_actors::{Error, FieldCode, Resource};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::error::ApiError;
use super::validate::{path_id, Query};
use super::wire::{Description, DisplayName, Html, Name, Subject, Text};
use super::AppState;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateView {
    id: String,
    name: String,
    description: Option<String>,
    subject: String,
    body: String,
    /// The text/plain part of its emails; null: made from the body.
    text: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
    from: Option<String>,
    from_name: Option<String>,
    reply_to: Option<String>,
    created_at: String,
    updated_at: String,
}

impl From<&Template> for TemplateView {
    fn from(t: &Template) -> Self {
        TemplateView {
            id: t.id.to_string(),
            name: t.name.clone(),
            description: t.description.clone(),
            subject: t.subject.clone(),
            body: t.body.clone(),
            text: t.text.clone(),
            kind: t.kind.as_str(),
            from: t.from.as_ref().map(|e| e.to_string()),
            from_name: t.from_name.clone(),
            reply_to: t.reply_to.as_ref().map(|e| e.to_string()),
            created_at: t.created_at.to_iso(),
            updated_at: t.updated_at.to_iso(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateList {
    templates: Vec<TemplateView>,
    cursor: Option<String>,
    has_more: bool,
    total: u64,
    page: u64,
    page_size: u64,
    total_pages: u64,
}

/// Request body of POST /templates.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTemplateRequest {
    name: Name,
    subject: Subject,
    /// HTML, with `{{variable}}`, `{{ data.x }}` and `{{x ?? "fallback"}}`.
    body: Html,
    /// The text/plain part of its emails, a template like the body but not HTML-escaped;
    /// without it the part is made from the HTML.
    text: Option<Html>,
    /// TRANSACTIONAL (default) or MARKETING.
    #[serde(rename = "type")]
    kind: Option<TemplateKind>,
    from: Option<EmailAddress>,
    from_name: Option<DisplayName>,
    reply_to: Option<EmailAddress>,
    description: Option<Description>,
}

/// Request body of PATCH /templates/{id}: the fields to change.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTemplateRequest {
    name: Option<Name>,
    subject: Option<Subject>,
    body: Option<Html>,
    text: Option<Html>,
    #[serde(rename = "type")]
    kind: Option<TemplateKind>,
    from: Option<EmailAddress>,
    from_name: Option<DisplayName>,
    reply_to: Option<EmailAddress>,
    description: Option<Description>,
}

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
    let search = q
        .get("search")
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty());
    let cursor = match page.cursor() {
        Some(c) => Some(
            c.parse::<TemplateId>()
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?,
        ),
        None => None,
    };
    let limit = page.limit();
    let all = state.engine.templates().all(p.id).await?;
    let matching: Vec<&Template> = all
        .iter()
        .filter(|t| kind.is_none_or(|k| t.kind == k))
        .filter(|t| {
            search
                .as_deref()
                .is_none_or(|s| t.name.to_lowercase().contains(s))
        })
        .collect();
    let skip = cursor.map_or(0, |c| matching.iter().take_while(|t| t.id >= c).count());
    let items: Vec<&Template> = matching.iter().skip(skip).take(limit).copied().collect();
    let has_more = skip + items.len() < matching.len();
    let total = matching.len() as u64;
    Ok(HttpResponse::Ok().json(TemplateList {
        cursor: if has_more {
            items.last().map(|t| t.id.to_string())
        } else {
            None
        },
        templates: items.into_iter().map(TemplateView::from).collect(),
        has_more,
        total,
        page: (skip / limit) as u64 + 1,
        page_size: limit as u64,
        total_pages: total.div_ceil(limit as u64),
    }))
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
