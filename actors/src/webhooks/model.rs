//! An endpoint and one delivery of an event to it, as stored.

use serde::{Deserialize, Serialize};

use crate::model::{DeliveryId, EventId, WebhookId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    pub id: WebhookId,
    pub url: String,
    /// Event names, or `*` for every event.
    pub events: Vec<String>,
    pub enabled: bool,
    pub description: Option<String>,
    /// `whsec_<base64 of 32 random bytes>`.
    pub secret: String,
    /// The secret before the last rotation, and until when (ms) it signs too.
    pub previous_secret: Option<(String, i64)>,
    pub created_at: i64,
    /// Why the endpoint was disabled by the service (a 410, failures for too long).
    pub disabled_reason: Option<String>,
    /// Since when (ms) every attempt has failed; None after a success.
    pub failing_since: Option<i64>,
}

impl Webhook {
    pub fn wants(&self, event: &str) -> bool {
        self.enabled && self.events.iter().any(|e| e == "*" || e == event)
    }

    /// The secrets that sign now: the current one, and the previous one during its
    /// rotation's grace.
    pub fn signing_secrets(&self, now_ms: i64) -> Vec<&str> {
        let mut secrets = vec![self.secret.as_str()];
        if let Some((old, until)) = &self.previous_secret {
            if *until > now_ms {
                secrets.push(old.as_str());
            }
        }
        secrets
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeliveryStatus {
    /// Waiting for its first or next attempt.
    Pending,
    Delivered,
    /// Failed for good: its retries ran out, or the endpoint answered 410.
    Failed,
    /// Not sent: the endpoint was deleted or disabled meanwhile.
    Cancelled,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "PENDING",
            DeliveryStatus::Delivered => "DELIVERED",
            DeliveryStatus::Failed => "FAILED",
            DeliveryStatus::Cancelled => "CANCELLED",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    pub id: DeliveryId,
    pub webhook: WebhookId,
    /// The event's id: the `webhook-id` of every attempt.
    pub event: EventId,
    /// The event's name (`type` in the payload).
    pub kind: String,
    /// The JSON body, as it is signed and sent on every attempt; empty once the
    /// delivery is over (delivered, failed or cancelled).
    pub payload: String,
    /// Attempts made so far.
    pub attempts: u32,
    pub status: DeliveryStatus,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub created_at: i64,
    /// The last attempt's time.
    pub attempted_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
}
