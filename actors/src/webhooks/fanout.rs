//! What an endpoint receives for an event (`payload`), and the hook that tells the
//! deliverer a project has events to deliver (`project::hooks::AfterEvents`).

use serde_json::{json, Map, Value};

use crate::error::Result;
use crate::model::{EmailId, Event, ProjectId};
use crate::project::hooks::EventsCtx;
use crate::store::{Batch, Store};

use super::endpoints::Endpoints;

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
        .and_then(|id| {
            crate::email::sending::load_email(store, p, id)
                .ok()
                .flatten()
        })
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

/// The after-events hook: when an endpoint of the project wants one of `events`, the
/// deliverer is told to look at the project's log once the batch is durable. Nothing
/// is written here: the event log is the queue, and each endpoint's cursor says how far
/// it has been delivered, so an event with an endpoint costs its write no more than one
/// without (each delivery used to add two keys to the event's batch, a quarter of
/// `/v1/track`'s throughput).
pub fn on_events(ctx: &EventsCtx, _batch: &mut Batch, events: &[Event]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let endpoints = Endpoints::of(ctx.states)?.all(ctx.store, ctx.project)?;
    if endpoints
        .iter()
        .any(|w| events.iter().any(|e| w.wants(&e.name)))
    {
        ctx.wakeups.webhooks_after_write(ctx.project);
    }
    Ok(())
}
