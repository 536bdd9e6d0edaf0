//! Event webhooks to the caller (API.md 26): endpoints, their recent deliveries, a test
//! event and secret rotation, every answer in the `{success, data}` envelope. The
//! deliveries themselves are the engine's (`mailroom_actors::webhooks`).

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::webhooks::{NewWebhook, WebhookPatch};
use mailroom_actors::model::WebhookId;
use mailroom_actors::Resource;

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::envelope;
use crate::api::error::ApiError;
use crate::api::validate::{path_id, Query};
use crate::api::wire::Text;
use crate::state::AppState;

use crate::api::webhooks::{
    names, CreateWebhookRequest, DeliveryList, DeliveryView, TestResult, UpdateWebhookRequest,
    WebhookList, WebhookView,
};
#[utoipa::path(post, path = "/webhooks", tag = "Webhooks", request_body = CreateWebhookRequest,
    responses((status = 201, body = WebhookView), (status = 409, description = "limits.max_webhooks"),
              (status = 422, description = "a URL or an event name that cannot be used")),
    security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(req): Body<CreateWebhookRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let new = NewWebhook {
        url: req.url.into_string(),
        events: names(req.events),
        enabled: req.enabled.unwrap_or(true),
        description: req.description.map(Text::into_string),
    };
    let w = state.engine.webhooks().create(p.id, new).await?;
    Ok(envelope::created(WebhookView::new(&w, true)))
}

#[utoipa::path(get, path = "/webhooks", tag = "Webhooks",
    responses((status = 200, body = WebhookList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let all = state.engine.webhooks().list(p.id)?;
    Ok(envelope::ok(WebhookList {
        webhooks: all.iter().map(|w| WebhookView::new(w, false)).collect(),
    }))
}

#[utoipa::path(get, path = "/webhooks/{id}", tag = "Webhooks",
    responses((status = 200, body = WebhookView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: WebhookId = path_id(&id, Resource::Webhook)?;
    let w = state.engine.webhooks().get(p.id, id)?;
    Ok(envelope::ok(WebhookView::new(&w, false)))
}

#[utoipa::path(patch, path = "/webhooks/{id}", tag = "Webhooks", request_body = UpdateWebhookRequest,
    responses((status = 200, body = WebhookView), (status = 404), (status = 422)),
    security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(req): Body<UpdateWebhookRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: WebhookId = path_id(&id, Resource::Webhook)?;
    let patch = WebhookPatch {
        url: req.url.map(Text::into_string),
        events: req.events.map(names),
        enabled: req.enabled,
        description: req.description.change().map(|d| d.map(Text::into_string)),
    };
    let w = state.engine.webhooks().update(p.id, id, patch).await?;
    Ok(envelope::ok(WebhookView::new(&w, false)))
}

#[utoipa::path(delete, path = "/webhooks/{id}", tag = "Webhooks",
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: WebhookId = path_id(&id, Resource::Webhook)?;
    state.engine.webhooks().delete(p.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A new secret, shown this once; the old one signs beside it for 24 hours.
#[utoipa::path(post, path = "/webhooks/{id}/rotate-secret", tag = "Webhooks",
    responses((status = 200, body = WebhookView), (status = 404)), security(("bearer" = [])))]
pub async fn rotate_secret(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: WebhookId = path_id(&id, Resource::Webhook)?;
    let w = state.engine.webhooks().rotate_secret(p.id, id).await?;
    Ok(envelope::ok(WebhookView::new(&w, true)))
}

/// The endpoint's latest deliveries, newest first.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "Webhooks",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20")),
    responses((status = 200, body = DeliveryList), (status = 404)), security(("bearer" = [])))]
pub async fn deliveries(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: WebhookId = path_id(&id, Resource::Webhook)?;
    let limit = Query::parse(req.query_string())?.page()?.limit();
    let all = state.engine.webhooks().deliveries(p.id, id, limit)?;
    Ok(envelope::ok(DeliveryList {
        deliveries: all.iter().map(DeliveryView::new).collect(),
    }))
}

/// Sends a `webhook.test` event now, signed like the others, and answers its outcome.
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "Webhooks",
    responses((status = 200, body = TestResult), (status = 404)), security(("bearer" = [])))]
pub async fn test(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: WebhookId = path_id(&id, Resource::Webhook)?;
    let got = state.engine.webhooks().test(p.id, id).await?;
    Ok(envelope::ok(TestResult {
        delivered: got.delivered,
        status_code: got.status_code,
        error: got.error,
    }))
}
