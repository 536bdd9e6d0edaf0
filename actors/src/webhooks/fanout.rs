//! The hook that turns events into deliveries (`project::hooks::AfterEvents`): in the
//! batch that records the events, one delivery per event and subscribed endpoint, and
//! its entry in the queue, due at once.

use serde_json::{json, Map, Value};

use crate::error::Result;
use crate::model::{DeliveryId, EmailId, Event, OutboundEmail, ProjectId};
use crate::project::write::WriteCtx;
use crate::store::{keys, Batch, Store};

use super::endpoints::Endpoints;
use super::model::{Delivery, DeliveryStatus};
use super::records;

/// The JSON an endpoint receives for `event` (API.md 26): `{id, type, createdAt, data}`,
/// `data` holding the contact and what the event recorded (`emailId`, `campaignId`,
/// a link, ...), and for an email's event what a receiver needs of the email without a
/// second call: `messageId`, `subject`, `workflowId` (one a workflow step sent).
pub fn payload(store: &dyn Store, p: ProjectId, event: &Event) -> String {
    let mut data = Map::new();
    data.insert("contactId".into(), json!(event.contact_id.to_string()));
    data.insert("email".into(), json!(event.email.as_str()));
    for (k, v) in event.data.iter() {
        data.entry(k.clone()).or_insert_with(|| v.clone());
    }
    if let Some(email) = event
        .data
        .get("emailId")
        .and_then(Value::as_str)
        .and_then(|id| id.parse::<EmailId>().ok())
        .and_then(|id| store.get(&keys::email(p, id)).ok().flatten())
        .and_then(|b| OutboundEmail::decode(&b).ok())
    {
        data.insert(
            "messageId".into(),
            json!(crate::mailer::mime::message_id(&email)),
        );
        data.insert("subject".into(), json!(email.subject));
        let workflow = email.workflow_execution_id.and_then(|x| {
            crate::workflow::executions::load(store, p, x)
                .ok()
                .flatten()
        });
        if let Some(x) = workflow {
            data.insert("workflowId".into(), json!(x.workflow_id.to_string()));
        }
    }
    json!({
        "id": event.id.to_string(),
        "type": event.name,
        "createdAt": event.created_at.to_iso(),
        "data": Value::Object(data),
    })
    .to_string()
}

pub fn on_events(ctx: &WriteCtx, batch: &mut Batch, events: &[Event]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let (store, p) = (ctx.store, ctx.project);
    let endpoints = Endpoints::of(ctx.states)?.all(store, p)?;
    if endpoints.iter().all(|w| !w.enabled) {
        return Ok(());
    }
    for event in events {
        let mut body = None;
        for w in endpoints.iter().filter(|w| w.wants(&event.name)) {
            let payload = body.get_or_insert_with(|| payload(store, p, event)).clone();
            let at = event.created_at.millis();
            let d = Delivery {
                id: DeliveryId::new(),
                webhook: w.id,
                event: event.id,
                kind: event.name.clone(),
                payload,
                attempts: 0,
                status: DeliveryStatus::Pending,
                status_code: None,
                error: None,
                created_at: at,
                attempted_at: None,
                next_attempt_at: Some(at),
            };
            records::put_delivery(batch, p, &d)?;
            batch.put(keys::webhook_due(at, p, w.id, d.id), Vec::new());
        }
    }
    Ok(())
}
