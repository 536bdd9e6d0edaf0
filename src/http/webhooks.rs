//! Event webhooks to the caller (API.md 26): endpoints, their recent deliveries, a test
//! event and secret rotation, every answer in the `{success, data}` envelope. The
//! deliveries themselves are the engine's (`mailroom_actors::webhooks`).

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::webhooks::{Delivery, Webhook};
use mailroom_actors::engine::webhooks::{NewWebhook, WebhookPatch};
use mailroom_actors::model::{Timestamp, WebhookId};
use mailroom_actors::Resource;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::envelope;
use super::error::ApiError;
use super::validate::{path_id, Query};
use super::wire::{Description, Nullable, Text};
use super::AppState;

type Url = Text<2048>;
type EventName = Text<255>;

/// An endpoint. `secret` is shown when it is created and by rotate-secret only.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    /// Event names, or `*` for every event.
    pub events: Vec<String>,
    pub enabled: bool,
    pub description: Option<String>,
    /// `whsec_...`: verify `webhook-signature` with it (Standard Webhooks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Why the service disabled the endpoint (a 410, failures for too long).
    pub disabled_reason: Option<String>,
    pub created_at: String,
}

impl WebhookView {
    fn new(w: &Webhook, with_secret: bool) -> Self {
        WebhookView {
            id: w.id.to_string(),
            url: w.url.clone(),
            events: w.events.clone(),
            enabled: w.enabled,
            description: w.description.clone(),
            secret: with_secret.then(|| w.secret.clone()),
            disabled_reason: w.disabled_reason.clone(),
            created_at: Timestamp::from(w.created_at).to_iso(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

/// One delivery of an event to an endpoint.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    pub id: String,
    /// The event's id: the `webhook-id` header of every attempt.
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Attempts made so far.
    pub attempt: u32,
    /// PENDING, DELIVERED, FAILED or CANCELLED.
    pub status: &'static str,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    /// The last attempt, or when the delivery was made.
    pub at: String,
    pub next_attempt_at: Option<String>,
}

impl DeliveryView {
    fn new(d: &Delivery) -> Self {
        let iso = |ms: i64| Timestamp::from(ms).to_iso();
        DeliveryView {
            id: d.id.to_string(),
            event_id: d.event.to_string(),
            kind: d.kind.clone(),
            attempt: d.attempts,
            status: d.status.as_str(),
            status_code: d.status_code,
            error: d.error.clone(),
            at: iso(d.attempted_at.unwrap_or(d.created_at)),
            next_attempt_at: d.next_attempt_at.map(iso),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryView>,
}

/// What the test event got.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestResult {
    pub delivered: bool,
    pub status_code: Option<u16>,
    pub error: Option<String>,
}

/// Request body of POST /webhooks.
#[derive(Deserialize, ToSchema)]
pub struct CreateWebhookRequest {
    /// http:// or https://; not a private address unless the operator allows it.
    url: Url,
    /// Event names (`email.sent`, `email.open`, `contact.unsubscribed`, a tracked
    /// event's name, ...) or `*`; at least one.
    #[schema(min_items = 1)]
    events: Vec<EventName>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    description: Option<Description>,
}

/// Request body of PATCH /webhooks/{id}: what is left out stays as it is.
#[derive(Deserialize, ToSchema)]
pub struct UpdateWebhookRequest {
    #[serde(default)]
    url: Option<Url>,
    #[serde(default)]
    #[schema(min_items = 1)]
    events: Option<Vec<EventName>>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Description>)]
    description: Nullable<Description>,
}

impl CreateWebhookRequest {
    /// The URL and the event names (the dashboard's form sends the same request).
    pub fn into_parts(self) -> (String, Vec<String>) {
        (self.url.into_string(), names(self.events))
    }
}

fn names(events: Vec<EventName>) -> Vec<String> {
    events.into_iter().map(Text::into_string).collect()
}

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
