//! Reading events. Every event index ends with the event id, and ids sort by the
//! event's time, so a listing walks one index backwards between two keys: by contact,
//! by name, or all events; `since` and `until` only narrow the key range.

use super::contacts::{find_id_by_email, read_counter};
use super::events::EVENTS_COUNTER;
use crate::error::{Error, FieldCode, Result};
use crate::model::{
    ContactId, EmailAddress, Event, EventId, EventStats, Page, PageRequest, ProjectId, Timestamp,
};
use crate::store::{codec, keys, Store};

#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub name: Option<String>,
    pub contact: Option<ContactId>,
    pub email: Option<EmailAddress>,
    /// Inclusive bounds on `createdAt`.
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

pub fn get_event(store: &dyn Store, p: ProjectId, id: EventId) -> Result<Option<Event>> {
    store
        .get(&keys::event(p, id))?
        .map(|b| Event::decode(&b))
        .transpose()
}

/// Every event name with its count and last time, most recently seen first.
pub fn event_names(store: &dyn Store, p: ProjectId) -> Result<Vec<(String, EventStats)>> {
    let prefix = keys::event_names(p);
    let mut out = Vec::new();
    for kv in store.scan(&prefix, None, false) {
        let (k, v) = kv?;
        let name = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
        out.push((name, codec::decode::<EventStats>(&v)?));
    }
    out.sort_by(|a, b| b.1.last_at.cmp(&a.1.last_at).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

fn with_id(prefix: &[u8], id: EventId) -> Vec<u8> {
    keys::with_id(prefix, id.as_bytes())
}

/// Newest first; the cursor is the id of the last event of the previous page.
pub fn list_events(
    store: &dyn Store,
    p: ProjectId,
    f: &EventFilter,
    page: &PageRequest,
) -> Result<Page<Event>> {
    let empty = || Page {
        items: Vec::new(),
        next_cursor: None,
        total: 0,
    };
    let contact = match &f.email {
        Some(email) => match find_id_by_email(store, p, email.as_str())? {
            Some(id) if f.contact.is_none_or(|c| c == id) => Some(id),
            _ => return Ok(empty()),
        },
        None => f.contact,
    };
    let cursor = page
        .cursor()
        .map(|c| c.parse::<EventId>())
        .transpose()
        .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?;
    let (prefix, indexed) = match (&contact, &f.name) {
        (Some(c), _) => (keys::events_by_contact(p, *c), true),
        (None, Some(n)) => (keys::events_by_name(p, n), true),
        (None, None) => (keys::events(p), false),
    };
    // With the contact index, a name is checked on each record.
    let name_check = contact.and(f.name.as_deref());
    let until_key = f.until.map(|t| {
        with_id(
            &prefix,
            EventId::floor(Timestamp::from(t.millis().saturating_add(1))),
        )
    });
    let since_key = f.since.map(|t| with_id(&prefix, EventId::floor(t)));
    let start = match (cursor.map(|c| with_id(&prefix, c)), until_key.clone()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };

    let load = |k: &[u8], v: &[u8]| -> Result<Option<Event>> {
        let event = if indexed {
            let Some(id) = keys::id_after::<EventId>(k, &prefix) else {
                return Ok(None);
            };
            match store.get(&keys::event(p, id))? {
                Some(b) => Event::decode(&b)?,
                None => return Ok(None),
            }
        } else {
            Event::decode(v)?
        };
        Ok(Some(event).filter(|e| name_check.is_none_or(|n| e.name == n)))
    };

    let mut items = Vec::with_capacity(page.limit() + 1);
    for kv in store.scan(&prefix, start.as_deref(), true) {
        let (k, v) = kv?;
        if since_key.as_ref().is_some_and(|s| k < *s) {
            break;
        }
        if let Some(e) = load(&k, &v)? {
            items.push(e);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    let has_more = items.len() > page.limit();
    items.truncate(page.limit());
    let next_cursor = has_more
        .then(|| items.last().map(|e| e.id.to_string()))
        .flatten();

    let timeless = f.since.is_none() && f.until.is_none();
    let total = match (contact, &f.name, timeless) {
        (None, None, true) => read_counter(store, p, EVENTS_COUNTER)?,
        (None, Some(n), true) => stats(store, &keys::event_name(p, n))?.count,
        (Some(c), Some(n), true) => stats(store, &keys::contact_event_stats(p, n, c))?.count,
        _ => {
            let mut n = 0;
            for kv in store.scan(&prefix, until_key.as_deref(), true) {
                let (k, v) = kv?;
                if since_key.as_ref().is_some_and(|s| k < *s) {
                    break;
                }
                if name_check.is_none() || load(&k, &v)?.is_some() {
                    n += 1;
                }
            }
            n
        }
    };
    Ok(Page {
        items,
        next_cursor,
        total,
    })
}

fn stats(store: &dyn Store, key: &[u8]) -> Result<EventStats> {
    Ok(match store.get(key)? {
        Some(b) => codec::decode(&b)?,
        None => EventStats::default(),
    })
}
