//! `POST /v1/track` (API.md section 6): records an event for a contact and creates or
//! updates the contact, with a public or a secret key. Answers in the `{success, data}`
//! envelope.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::events::Track;
use mailroom_actors::model::{DataMap, DataPatch, EmailAddress, KeyKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::AnyKey;
use super::body::BodyJson;
use super::error::ApiError;
use super::idempotency;
use super::validate::data_within;
use super::wire::EventName;
use super::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct TrackData {
    /// The contact's id.
    pub contact: String,
    /// The event's id.
    pub event: String,
    pub timestamp: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TrackResponse {
    pub success: bool,
    pub data: TrackData,
}

/// Request body of POST /v1/track.
#[derive(Deserialize, ToSchema)]
pub struct TrackRequest {
    email: EmailAddress,
    /// The event name; `email.*`, `contact.subscribed`, `contact.unsubscribed` and
    /// `segment.*.entry|exit` are reserved (422 `reserved_event`).
    event: EventName,
    /// Sets the subscription flag; a new contact is subscribed by default. With a public
    /// key it applies only to a contact that this call creates.
    subscribed: Option<bool>,
    /// Values are merged into the contact; a value `{value, persistent: false}` is kept
    /// on the event only, and `{value, persistent: true}` is stored as its plain value.
    /// `null` deletes the key, with the secret key only.
    #[schema(value_type = Option<Object>)]
    data: Option<DataMap>,
}

/// A `data` value of the form `{value, persistent: bool}` (exactly those two keys),
/// unwrapped; any other value is plain, and persistent.
fn unwrap(v: &Value) -> (&Value, bool) {
    if let Some(obj) = v.as_object() {
        if let (2, Some(value), Some(Value::Bool(persistent))) =
            (obj.len(), obj.get("value"), obj.get("persistent"))
        {
            return (value, *persistent);
        }
    }
    (v, true)
}

/// Splits the call's data into what the contact keeps and what the event carries.
fn split(data: DataMap) -> (DataPatch, DataMap) {
    let mut contact = DataMap::new();
    let mut event = DataMap::new();
    for (k, v) in &data {
        let (value, persistent) = unwrap(v);
        if persistent {
            contact.insert(k.clone(), value.clone());
        }
        event.insert(k.clone(), value.clone());
    }
    (DataPatch::new(contact), event)
}

#[utoipa::path(post, path = "/v1/track", tag = "Events", request_body = TrackRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$",
            description = "1 to 255 visible ASCII characters: the same key and body within 24 h replay the first answer")),
    responses((status = 200, body = TrackResponse), (status = 409, description = "key reused with another body"),
              (status = 422, description = "invalid, or a reserved event name")),
    security(("bearer" = [])))]
pub async fn track(
    AnyKey(p): AnyKey,
    req: HttpRequest,
    BodyJson(request, body): BodyJson<TrackRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let data = request.data.unwrap_or_default();
    data_within("data", &data, state.limits.max_data_bytes)?;
    // A public key's Idempotency-Keys live apart from the secret key's: whoever copied
    // the public key cannot replay, or block, what the project's servers sent.
    let scope = match p.kind {
        KeyKind::Public => "track.public",
        KeyKind::Secret => "track",
    };
    let claim = idempotency::claim(&req, scope, &body, state.idempotency_ttl_ms)?;
    let (contact_data, event_data) = split(data);
    let msg = Track {
        email: request.email,
        subscribed: request.subscribed,
        contact_data,
        event: request.event.into_string(),
        event_data,
        idempotency: claim,
        key: p.kind,
    };
    let out = state.engine.events().track(p.id, msg).await?;
    Ok(HttpResponse::Ok().json(TrackResponse {
        success: true,
        data: TrackData {
            contact: out.contact.to_string(),
            event: out.event.to_string(),
            timestamp: out.timestamp().to_iso(),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn persistent_false_values_stay_on_the_event() {
        let data = json!({"plan": "pro", "cart": {"value": 3, "persistent": false},
                          "tier": {"value": "gold", "persistent": true}, "obj": {"value": 1}})
        .as_object()
        .cloned()
        .unwrap();
        let (contact, event) = split(data);
        let mut target = DataMap::new();
        contact.apply(&mut target);
        assert_eq!(
            Value::Object(target),
            json!({"plan": "pro", "tier": "gold", "obj": {"value": 1}})
        );
        assert_eq!(
            Value::Object(event),
            json!({"plan": "pro", "cart": 3, "tier": "gold", "obj": {"value": 1}})
        );
    }
}
