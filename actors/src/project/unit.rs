//! One actor message, one batch: the write of a send (every recipient's contact and
//! every email), of a bounce (the email and its contact) or of an unsubscribe link (the
//! contact and the campaign's count) gathers its keys, its events and its contact
//! changes here and applies them together, once. A backend with transactions turns
//! each unit into one transaction; sled gets one log record and one flush.
//!
//! Events go through a single `events::append_all` at the end, since a batch cannot
//! read its own writes: two appends would each read the same statistics and block.

use serde_json::{Map, Value};

use super::counters::ProjectCounts;
use super::events;
use super::write::WriteCtx;
use crate::error::Result;
use crate::model::{Contact, Event};
use crate::store::{keys, Batch};

/// A contact change, prepared but not yet written.
pub struct Change {
    pub before: Option<Contact>,
    pub after: Contact,
    /// The counters before and after the change.
    pub counts_before: ProjectCounts,
    pub counts: ProjectCounts,
    /// What the `contact.subscribed` / `.unsubscribed` event says beyond the flag
    /// (`reason`, `campaignId`).
    pub note: Map<String, Value>,
}

impl Change {
    pub fn is_new(&self) -> bool {
        self.before.is_none()
    }
}

/// The batch of one message, its events, and the contact changes it makes.
pub struct WriteUnit {
    pub batch: Batch,
    /// Appended once, by `apply`. A caller adds the events of a contact before staging
    /// its change, so the segments judge the change with them.
    pub events: Vec<Event>,
    counts_before: ProjectCounts,
    counts: ProjectCounts,
    /// Each staged contact, as stored, for the in-memory table once the batch applies.
    contacts: Vec<(Contact, Vec<u8>)>,
}

impl WriteUnit {
    pub fn new(counts: ProjectCounts) -> Self {
        WriteUnit::with(Batch::new(), Vec::new(), counts)
    }

    /// A unit that starts with the caller's `batch` and `events`.
    pub fn with(batch: Batch, events: Vec<Event>, counts: ProjectCounts) -> Self {
        WriteUnit {
            batch,
            events,
            counts_before: counts,
            counts,
            contacts: Vec::new(),
        }
    }

    /// The counters as the staged changes leave them: what the next change is
    /// prepared from.
    pub fn counts(&self) -> ProjectCounts {
        self.counts
    }

    /// Adds a change prepared from `counts()`: the record, the email index, a
    /// `contact.subscribed` / `.unsubscribed` event when the flag really changes, and
    /// the events the features' states say it causes (segment entries and exits). A contact is staged at most once a
    /// unit: the table, which the next change is prepared from, changes only in `apply`.
    pub fn stage(&mut self, ctx: &WriteCtx, change: &Change) -> Result<()> {
        let (p, contact) = (ctx.project, &change.after);
        let stored = contact.encode()?;
        // A change that fails leaves the unit as it was (a bounce still records the
        // email's outcome when its contact cannot be unsubscribed).
        let events_before = self.events.len();
        if let Some(before) = change
            .before
            .as_ref()
            .filter(|b| b.subscribed != contact.subscribed)
        {
            let name = if before.subscribed {
                "contact.unsubscribed"
            } else {
                "contact.subscribed"
            };
            let mut ev = Event::system(name, contact.id, &contact.email, ctx.now);
            ev.data
                .extend(change.note.iter().map(|(k, v)| (k.clone(), v.clone())));
            self.events.push(ev);
        }
        let moves = ctx.states.after_contact_write(
            ctx.store,
            p,
            change.before.as_ref(),
            contact,
            &self.events,
            ctx.now,
        );
        match moves {
            Ok(moves) => self.events.extend(moves),
            Err(e) => {
                self.events.truncate(events_before);
                return Err(e);
            }
        }
        self.batch.put(keys::contact(p, contact.id), stored.clone());
        // The email never changes, so its index entry is written once, with the contact.
        if change.is_new() {
            self.batch.put(
                keys::contact_by_email(p, contact.email.as_str()),
                contact.id.to_string().into_bytes(),
            );
        }
        self.counts = change.counts;
        self.contacts.push((contact.clone(), stored));
        Ok(())
    }

    /// Writes the counters and the events into the batch, applies it, then updates the
    /// contact table; answers the counters the actor keeps from now on. Nothing is
    /// written when any step fails.
    pub fn apply(mut self, ctx: &WriteCtx) -> Result<ProjectCounts> {
        let p = ctx.project;
        self.counts
            .write_changed(&self.counts_before, &mut self.batch, p);
        events::append_all(ctx, &mut self.batch, &self.events)?;
        if !self.batch.is_empty() {
            ctx.store.apply(self.batch)?;
        }
        for (contact, stored) in &self.contacts {
            ctx.table.put(contact, stored);
        }
        Ok(self.counts)
    }
}
