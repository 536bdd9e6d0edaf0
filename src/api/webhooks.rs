//! The typed requests and views of the webhooks endpoints (handled in
//! `http/webhooks.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::engine::webhooks::{Delivery, Webhook};
use mailroom_actors::model::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::wire::{Description, Nullable, Text};

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
    pub fn new(w: &Webhook, with_secret: bool) -> Self {
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
    pub fn new(d: &Delivery) -> Self {
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
    pub url: Url,
    /// Event names (`email.sent`, `email.open`, `contact.unsubscribed`, a tracked
    /// event's name, ...) or `*`; at least one.
    #[schema(min_items = 1)]
    pub events: Vec<EventName>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub description: Option<Description>,
}

/// Request body of PATCH /webhooks/{id}: what is left out stays as it is.
#[derive(Deserialize, ToSchema)]
pub struct UpdateWebhookRequest {
    #[serde(default)]
    pub url: Option<Url>,
    #[serde(default)]
    #[schema(min_items = 1)]
    pub events: Option<Vec<EventName>>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Description>)]
    pub description: Nullable<Description>,
}

impl CreateWebhookRequest {
    /// The URL and the event names (the dashboard's form sends the same request).
    pub fn into_parts(self) -> (String, Vec<String>) {
        (self.url.into_string(), names(self.events))
    }
}

pub fn names(events: Vec<EventName>) -> Vec<String> {
    events.into_iter().map(Text::into_string).collect()
}
