//! Contact writes. Each builds one atomic batch: the record, the email index, the
//! counters behind `total`, and any `contact.subscribed` / `contact.unsubscribed`
//! event (recorded only when the flag really changes).

use super::events;
use super::messages::{PatchContact, UpsertContact, UpsertOutcome};
use crate::error::{Error, Resource, Result};
use crate::model::{Contact, ContactId, DataMap, Event, ProjectId, Timestamp};
use crate::store::{codec, keys, Batch, Store};

const CONTACTS: &str = "contacts";
const SUBSCRIBED: &str = "subscribed";

/// The counters a project actor keeps in memory and in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub contacts: u64,
    pub subscribed: u64,
}

impl Counts {
    pub fn load(store: &dyn Store, p: ProjectId) -> Result<Self> {
        Ok(Counts {
            contacts: read_counter(store, p, CONTACTS)?,
            subscribed: read_counter(store, p, SUBSCRIBED)?,
        })
    }

    fn write(&self, batch: &mut Batch, p: ProjectId) {
        batch.put(keys::counter(p, CONTACTS), codec::encode_u64(self.contacts));
        batch.put(
            keys::counter(p, SUBSCRIBED),
            codec::encode_u64(self.subscribed),
        );
    }
}

pub fn read_counter(store: &dyn Store, p: ProjectId, name: &str) -> Result<u64> {
    Ok(store
        .get(&keys::counter(p, name))?
        .map(|b| codec::decode_u64(&b))
        .unwrap_or(0))
}

pub fn find_by_email(store: &dyn Store, p: ProjectId, email: &str) -> Result<Option<Contact>> {
    let Some(id) = store.get(&keys::contact_by_email(p, email))? else {
        return Ok(None);
    };
    let id: ContactId = std::str::from_utf8(&id)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Storage("bad email index entry".into()))?;
    load(store, p, id)
}

pub fn load(store: &dyn Store, p: ProjectId, id: ContactId) -> Result<Option<Contact>> {
    store
        .get(&keys::contact(p, id))?
        .map(|b| Contact::decode(&b))
        .transpose()
}

pub fn upsert(
    store: &dyn Store,
    p: ProjectId,
    counts: &mut Counts,
    msg: UpsertContact,
    now: Timestamp,
) -> Result<UpsertOutcome> {
    let existing = find_by_email(store, p, msg.email.as_str())?;
    let is_new = existing.is_none();
    let (before, mut contact) = match existing {
        Some(c) => (Some(c.subscribed), c),
        None => (
            None,
            Contact {
                id: ContactId::new(),
                email: msg.email.clone(),
                subscribed: msg.default_subscribed,
                data: DataMap::new(),
                created_at: now,
                updated_at: now,
            },
        ),
    };
    if let Some(s) = msg.subscribed {
        contact.subscribed = s;
    }
    msg.data.apply(&mut contact.data);
    contact.updated_at = now;
    let mut next = *counts;
    if is_new {
        next.contacts += 1;
    }
    adjust_subscribed(&mut next, before, contact.subscribed);
    write(store, p, &contact, before, next, now)?;
    *counts = next;
    Ok(UpsertOutcome { contact, is_new })
}

pub fn patch(
    store: &dyn Store,
    p: ProjectId,
    counts: &mut Counts,
    msg: PatchContact,
    now: Timestamp,
) -> Result<Contact> {
    let mut contact = load(store, p, msg.id)?.ok_or(Error::NotFound(Resource::Contact))?;
    let before = Some(contact.subscribed);
    if let Some(s) = msg.subscribed {
        contact.subscribed = s;
    }
    msg.data.apply(&mut contact.data);
    contact.updated_at = now;
    let mut next = *counts;
    adjust_subscribed(&mut next, before, contact.subscribed);
    write(store, p, &contact, before, next, now)?;
    *counts = next;
    Ok(contact)
}

pub fn delete(store: &dyn Store, p: ProjectId, counts: &mut Counts, id: ContactId) -> Result<()> {
    let contact = load(store, p, id)?.ok_or(Error::NotFound(Resource::Contact))?;
    let mut next = *counts;
    next.contacts = next.contacts.saturating_sub(1);
    if contact.subscribed {
        next.subscribed = next.subscribed.saturating_sub(1);
    }
    let mut batch = Batch::new();
    batch.delete(keys::contact(p, id));
    batch.delete(keys::contact_by_email(p, contact.email.as_str()));
    next.write(&mut batch, p);
    store.apply(batch)?;
    *counts = next;
    Ok(())
}

fn adjust_subscribed(counts: &mut Counts, before: Option<bool>, after: bool) {
    match (before.unwrap_or(false), after) {
        (false, true) => counts.subscribed += 1,
        (true, false) => counts.subscribed = counts.subscribed.saturating_sub(1),
        _ => {}
    }
}

fn write(
    store: &dyn Store,
    p: ProjectId,
    contact: &Contact,
    subscribed_before: Option<bool>,
    counts: Counts,
    now: Timestamp,
) -> Result<()> {
    let mut batch = Batch::new();
    batch.put(keys::contact(p, contact.id), contact.encode()?);
    batch.put(
        keys::contact_by_email(p, contact.email.as_str()),
        contact.id.to_string().into_bytes(),
    );
    counts.write(&mut batch, p);
    if let Some(before) = subscribed_before.filter(|b| *b != contact.subscribed) {
        let name = if before {
            "contact.unsubscribed"
        } else {
            "contact.subscribed"
        };
        events::append(
            store,
            &mut batch,
            p,
            &Event::system(name, contact.id, &contact.email, now),
        )?;
    }
    store.apply(batch)
}
