//! `POST /v1/track`: create or update the contact and record the event, in one batch
//! (with the idempotent reply, when the request carries an `Idempotency-Key`).

use serde::{Deserialize, Serialize};

use crate::contact::records::{self as contacts, ProjectCounts, WriteCtx};
use crate::error::Result;
use crate::idempotency::{self, Claim};
use crate::model::{
    ContactId, DataMap, DataPatch, EmailAddress, Event, EventId, EventSource, KeyKind, Timestamp,
};
use crate::store::Batch;

/// The answer, and what an idempotent replay answers again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackOutcome {
    pub contact: ContactId,
    pub event: EventId,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
}

impl TrackOutcome {
    pub fn timestamp(&self) -> Timestamp {
        Timestamp::from(self.timestamp)
    }
}

pub fn track(ctx: &WriteCtx, counts: &mut ProjectCounts, msg: Track) -> Result<TrackOutcome> {
    // Tenants may not write the service's own events (a forged `email.open` or
    // `contact.unsubscribed` would fool stats, segments and workflows).
    if crate::model::event::is_reserved_name(&msg.event) {
        return Err(crate::error::Error::field(
            "event",
            crate::error::FieldCode::ReservedEvent,
            format!("'{}' is reserved for the service's own events", msg.event),
        ));
    }
    if let Some(claim) = &msg.idempotency {
        if let Some(reply) = idempotency::lookup(ctx.store, ctx.project, claim, ctx.now)? {
            return Ok(reply);
        }
    }
    // The public key is on web pages for anyone to copy: it may subscribe a contact it
    // creates, but never resubscribe (or unsubscribe) one that exists, and its nulls
    // delete no data key (it may still add keys and change values).
    let (subscribed, contact_data) = match msg.key {
        KeyKind::Secret => (msg.subscribed, msg.contact_data),
        KeyKind::Public => {
            let exists = ctx.table.by_email(msg.email.as_str())?.is_some();
            let subscribed = msg.subscribed.filter(|_| !exists);
            (subscribed, msg.contact_data.without_removals())
        }
    };
    // A new contact is subscribed unless the call says otherwise, as with POST /contacts.
    let change =
        contacts::prepare_upsert(ctx, *counts, &msg.email, subscribed, true, &contact_data)?;
    let event = Event {
        id: EventId::at(ctx.now),
        name: msg.event,
        contact_id: change.after.id,
        email: change.after.email.clone(),
        data: msg.event_data,
        source: EventSource::Api,
        created_at: ctx.now,
    };
    let outcome = TrackOutcome {
        contact: change.after.id,
        event: event.id,
        timestamp: ctx.now.millis(),
    };
    let mut batch = Batch::new();
    if let Some(claim) = &msg.idempotency {
        idempotency::record(&mut batch, ctx.project, claim, &outcome, ctx.now)?;
    }
    contacts::commit(ctx, &change, batch, vec![event])?;
    *counts = change.counts;
    Ok(outcome)
}

/// Record an event for a contact, creating or updating the contact (POST /v1/track).
#[derive(Debug)]
pub struct Track {
    pub email: EmailAddress,
    pub subscribed: Option<bool>,
    /// The plain and `persistent: true` values, merged into the contact.
    pub contact_data: DataPatch,
    pub event: String,
    /// Every value of the call's `data`, unwrapped; kept on the event.
    pub event_data: DataMap,
    pub idempotency: Option<Claim>,
    /// Which key the call came with: a public key's call may not change an existing
    /// contact's subscription nor delete its data keys.
    pub key: KeyKind,
}
