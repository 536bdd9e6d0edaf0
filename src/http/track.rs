//! `POST /v1/track` (API.md section 6): records an event for a contact and creates or
//! updates the contact, with a public or a secret key. Answers in the `{success, data}`
//! envelope.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::events::Track;
use mailroom_actors::model::{DataMap, DataPatch, KeyKind};
use serde_json::Value;

use super::auth::AnyKey;
use super::idempotency;
use crate::api::body::BodyJson;
use crate::api::error::ApiError;
use crate::api::validate::data_within;
use crate::state::AppState;

use crate::api::track::{TrackData, TrackRequest, TrackResponse};
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
