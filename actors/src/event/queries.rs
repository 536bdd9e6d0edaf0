//! Reading events. Every event index ends with the event id, and ids sort by the
//! event's time, so a listing walks one index backwards between two ids: by contact,
//! by name, or the whole log; `since` and `until` only narrow the range. The log and
//! both indexes are blocks of several events (`store::blocks`).

use crate::contact::records::{find_id_by_email, read_counter};
use crate::error::{Error, FieldCode, Result};
use crate::model::{
    ContactId, EmailAddress, Event, EventId, EventStats, Page, PageRequest, ProjectId, Timestamp,
};
use crate::project::events::EVENTS_COUNTER;
use crate::store::keys::KeyId;
use crate::store::{blocks, codec, keys, Store};

#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub name: Option<String>,
    pub contact: Option<ContactId>,
    pub email: Option<EmailAddress>,
    /// Inclusive bounds on `createdAt`.
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

/// The counter of a name's events removed by retention (the purger adds to it, so that
/// listings' totals stay right).
pub fn purged_counter(name: &str) -> String {
    format!("events-purged/{name}")
}

/// Every event of a project, newest first, read as the walk goes (an export).
pub fn each_event(store: &dyn Store, p: ProjectId) -> impl Iterator<Item = Result<Event>> + '_ {
    blocks::iter_rev(store, &keys::events(p), None).map(|entry| Event::decode(&entry?.1))
}

pub fn get_event(store: &dyn Store, p: ProjectId, id: EventId) -> Result<Option<Event>> {
    blocks::get(store, &keys::events(p), id.as_bytes())?
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
    let walk = Walk {
        store,
        p,
        contact,
        name: f.name.as_deref(),
        // Both bounds as ids: events below `until` + 1 ms, and at or above `since`.
        until: f
            .until
            .map(|t| EventId::floor(Timestamp::from(t.millis().saturating_add(1)))),
        since: f.since.map(EventId::floor),
    };
    let start = match (cursor, walk.until) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };

    let mut items = Vec::with_capacity(page.limit() + 1);
    for event in walk.events(start) {
        items.push(event?);
        if items.len() > page.limit() {
            break;
        }
    }
    let Page {
        items, next_cursor, ..
    } = Page::of(items, page, 0, |e| e.id.to_string());

    let timeless = f.since.is_none() && f.until.is_none();
    let total = match (contact, &f.name, timeless) {
        (None, None, true) => read_counter(store, p, EVENTS_COUNTER)?,
        // The statistics keep counting events that retention removed; a listing counts
        // only those left.
        (None, Some(n), true) => stats(store, &keys::event_name(p, n))?
            .count
            .saturating_sub(read_counter(store, p, &purged_counter(n))?),
        (Some(c), Some(n), true) if read_counter(store, p, &purged_counter(n))? == 0 => {
            stats(store, &keys::contact_event_stats(p, n, c))?.count
        }
        _ => walk.count()?,
    };
    Ok(Page {
        items,
        next_cursor,
        total,
    })
}

/// One listing's walk over the events, newest first: through the contact's index, the
/// name's index, or the whole log, whichever the filter narrows to.
struct Walk<'a> {
    store: &'a dyn Store,
    p: ProjectId,
    contact: Option<ContactId>,
    name: Option<&'a str>,
    until: Option<EventId>,
    since: Option<EventId>,
}

impl<'a> Walk<'a> {
    /// The list the walk reads: the contact's index, the name's, or the log itself.
    fn list(&self) -> Vec<u8> {
        match (self.contact, self.name) {
            (Some(c), _) => keys::events_by_contact(self.p, c),
            (None, Some(name)) => keys::events_by_name(self.p, name),
            (None, None) => keys::events(self.p),
        }
    }

    /// The list's entries below `before` (all when it is None) and at or after `since`,
    /// newest first: ids, with the event itself when the list is the log.
    fn entries(
        &self,
        before: Option<EventId>,
    ) -> impl Iterator<Item = Result<(EventId, Vec<u8>)>> + 'a {
        let since = self.since;
        blocks::iter_rev(self.store, &self.list(), before.map(|b| *b.as_bytes()))
            .map(|e| e.map(|(id, bytes)| (EventId::from_key_bytes(id), bytes)))
            .take_while(move |e| {
                e.as_ref()
                    .map_or(true, |(id, _)| since.is_none_or(|s| *id >= s))
            })
    }

    /// How many events pass the filter. Ids carry the time, so only a name checked
    /// against the contact's index needs the events themselves.
    fn count(&self) -> Result<u64> {
        if self.contact.is_some() && self.name.is_some() {
            return self.events(self.until).try_fold(0, |n, e| e.map(|_| n + 1));
        }
        self.entries(self.until)
            .try_fold(0, |n, e| e.map(|_| n + 1))
    }

    /// The events below `before` (every one when it is None) that pass the filter.
    fn events(&self, before: Option<EventId>) -> Box<dyn Iterator<Item = Result<Event>> + 'a> {
        let (store, p) = (self.store, self.p);
        let entries = self.entries(before);
        let indexed = self.contact.is_some() || self.name.is_some();
        // An index holds ids, and the events come from the log; the log holds them.
        let events = entries.filter_map(move |e| {
            let event = e.and_then(|(id, bytes)| match indexed {
                true => get_event(store, p, id),
                false => Event::decode(&bytes).map(Some),
            });
            event.transpose()
        });
        // The contact's index holds every name, so a name is checked on each event.
        let name = self.contact.and(self.name).map(str::to_owned);
        Box::new(events.filter(move |e| {
            e.as_ref()
                .map_or(true, |e| name.as_deref().is_none_or(|n| e.name == n))
        }))
    }
}

fn stats(store: &dyn Store, key: &[u8]) -> Result<EventStats> {
    Ok(match store.get(key)? {
        Some(b) => codec::decode(&b)?,
        None => EventStats::default(),
    })
}
