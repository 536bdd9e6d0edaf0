//! The five template endpoints (API.md section 4). Bare records and a bare list object
//! with `page`, `pageSize` and `totalPages` beside the cursor fields.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::model::template::TemplatePatch;
use mailroom_actors::model::{Template, TemplateId, TemplateKind, Timestamp};
use mailroom_actors::project::messages::{CreateTemplate, DeleteTemplate, UpdateTemplate};
use mailroom_actors::project::templates as stored;
use mailroom_actors::store::keys;
use mailroom_actors::{Error, FieldCode, Resource};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::JsonBody;
use super::error::ApiError;
use super::validate::{path_id, Fields, Query};
use super::{blocking, AppState};

const MAX_NAME: usize = 200;
/// RFC 5322 caps a header line at 998 characters.
const MAX_SUBJECT: usize = 998;
const MAX_BODY: usize = 1 << 20;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateView {
    id: String,
    name: String,
    description: Option<String>,
    subject: String,
    body: String,
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

/// Request body of POST /templates and PATCH /templates/{id} (all optional on PATCH).
#[allow(dead_code)]
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct TemplateRequest {
    name: String,
    subject: String,
    /// HTML, with `{{variable}}`, `{{ data.x }}` and `{{x ?? "fallback"}}`.
    body: String,
    /// TRANSACTIONAL (default) or MARKETING.
    #[schema(rename = "type")]
    kind: Option<String>,
    from: Option<String>,
    from_name: Option<String>,
    reply_to: Option<String>,
    description: Option<String>,
}

/// Reads the template fields; on create, name/subject/body are required.
fn parse(f: &mut Fields<'_>, create: bool) -> TemplatePatch {
    let text = |f: &mut Fields<'_>, name: &str, max: usize| {
        if create {
            f.string(name, max)
        } else {
            f.opt_string(name, max)
        }
    };
    let name = text(f, "name", MAX_NAME);
    let subject = text(f, "subject", MAX_SUBJECT);
    let body = text(f, "body", MAX_BODY);
    let kind = f
        .opt_enum("type", &["TRANSACTIONAL", "MARKETING"])
        .and_then(|k| TemplateKind::parse(&k));
    TemplatePatch {
        name,
        description: f.opt_string("description", 1000),
        subject,
        body,
        kind,
        from: f.opt_email("from"),
        from_name: f.opt_string("fromName", MAX_NAME),
        reply_to: f.opt_email("replyTo"),
    }
}

#[utoipa::path(post, path = "/templates", tag = "Templates", request_body = TemplateRequest,
    responses((status = 201, body = TemplateView), (status = 422)), security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::of(&body)?;
    let patch = parse(&mut f, true);
    f.finish()?;
    let (Some(name), Some(subject), Some(body)) = (patch.name, patch.subject, patch.body) else {
        return Err(Error::Internal("validated template fields went missing".into()).into());
    };
    state
        .registry
        .renders()
        .compile(subject.clone(), body.clone())
        .await?;
    let now = Timestamp::from(state.clock.now());
    let template = Template {
        id: TemplateId::new(),
        name,
        description: patch.description,
        subject,
        body,
        kind: patch.kind.unwrap_or(TemplateKind::Transactional),
        from: patch.from,
        from_name: patch.from_name,
        reply_to: patch.reply_to,
        created_at: now,
        updated_at: now,
    };
    let t = state.registry.send(p.id, CreateTemplate(template)).await?;
    Ok(HttpResponse::Created().json(TemplateView::from(&t)))
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
    let store = state.store.clone();
    let limit = page.limit();
    // Templates are few per project: one scan gives the page, the total and the position.
    let all: Vec<Template> = blocking(move || {
        store
            .scan(&keys::templates(p.id), None, true)
            .map(|kv| Template::decode(&kv?.1))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
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
    let t = stored::load(&*state.store, p.id, id)?.ok_or(Error::NotFound(Resource::Template))?;
    Ok(HttpResponse::Ok().json(TemplateView::from(&t)))
}

#[utoipa::path(patch, path = "/templates/{id}", tag = "Templates", request_body = TemplateRequest,
    responses((status = 200, body = TemplateView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: TemplateId = path_id(&id, Resource::Template)?;
    let mut f = Fields::of(&body)?;
    let patch = parse(&mut f, false);
    f.finish()?;
    // Subject and body compile as separate templates, so each given one is checked on
    // its own (an empty one stands in for the other).
    if patch.subject.is_some() || patch.body.is_some() {
        state
            .registry
            .renders()
            .compile(
                patch.subject.clone().unwrap_or_default(),
                patch.body.clone().unwrap_or_default(),
            )
            .await?;
    }
    let t = state
        .registry
        .send(p.id, UpdateTemplate { id, patch })
        .await?;
    state.templates.invalidate(id);
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
    state.registry.send(p.id, DeleteTemplate { id }).await?;
    state.templates.invalidate(id);
    Ok(HttpResponse::NoContent().finish())
}
