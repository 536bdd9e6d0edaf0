//! Running compiled filters over a project's stored contacts.
//!
//! This is the hot loop behind `memberCount`: each stored contact is read in its light
//! form (`ContactRef`, borrowing from the stored bytes), and only the top-level `data`
//! keys a filter names are parsed out of the JSON text; the rest of the text is
//! skipped without building values. Event conditions read per-contact statistics that
//! were loaded once, before the scan, from the per-name index.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::eval::{Compiled, Subject};
use crate::error::{Error, Result};
use crate::model::{Contact, ContactId, ContactRef, EventStats, Page, PageRequest, ProjectId};
use crate::project::events::stats_by_contact;
use crate::project::table::Row;
use crate::store::{keys, Store};

/// A compiled filter with what it needs to evaluate stored contacts. A clone shares
/// the filter and the event statistics and has scratch slots of its own, so that
/// threads can count parts of the contacts each with their own clone.
#[derive(Clone)]
pub struct Matcher {
    compiled: Arc<Compiled>,
    events: Arc<Vec<HashMap<ContactId, EventStats>>>,
    slots: Vec<Option<Value>>,
}

struct Light<'a, 'b> {
    c: &'b ContactRef<'a>,
    slots: &'b [Option<Value>],
    events: &'b [HashMap<ContactId, EventStats>],
}

impl Subject for Light<'_, '_> {
    fn email(&self) -> &str {
        self.c.email
    }
    fn subscribed(&self) -> bool {
        self.c.subscribed
    }
    fn created_at(&self) -> i64 {
        self.c.created_at
    }
    fn updated_at(&self) -> i64 {
        self.c.updated_at
    }
    fn data(&self, slot: usize) -> Option<&Value> {
        self.slots[slot].as_ref()
    }
    fn event(&self, slot: usize) -> Option<EventStats> {
        self.events[slot].get(&self.c.id).copied()
    }
}

impl Matcher {
    /// Loads the event statistics the filter asks about (one scan per event name).
    pub fn load(store: &dyn Store, p: ProjectId, compiled: Compiled) -> Result<Self> {
        let events = compiled
            .event_names()
            .iter()
            .map(|n| stats_by_contact(store, p, n))
            .collect::<Result<Vec<_>>>()?;
        let slots = vec![None; compiled.data_keys().len()];
        Ok(Matcher {
            compiled: Arc::new(compiled),
            events: Arc::new(events),
            slots,
        })
    }

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    pub fn matches(&mut self, c: &ContactRef<'_>, now: i64) -> bool {
        pick(c.data, self.compiled.data_keys(), &mut self.slots);
        let subject = Light {
            c,
            slots: &self.slots,
            events: &self.events,
        };
        self.compiled.matches(&subject, now)
    }
}

/// Below this many contacts a count stays on the calling thread.
const PARALLEL_FROM: usize = 50_000;

/// Counts the contacts each matcher accepts, in one pass over the stored contacts
/// (the rows of the project's in-memory table). Large tables are split over the
/// machine's cores, each part counted with its own clones of the matchers.
pub fn count(rows: &[Row], matchers: &mut [Matcher], now: i64) -> Result<Vec<u64>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if matchers.is_empty() || rows.len() < PARALLEL_FROM || threads < 2 {
        return count_part(rows, matchers, now);
    }
    let part = rows.len().div_ceil(threads);
    let results: Vec<Result<Vec<u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = rows
            .chunks(part)
            .map(|chunk| {
                let mut mine = matchers.to_vec();
                s.spawn(move || count_part(chunk, &mut mine, now))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("a count thread panicked".into())))
            })
            .collect()
    });
    let mut counts = vec![0u64; matchers.len()];
    for r in results {
        for (total, n) in counts.iter_mut().zip(r?) {
            *total += n;
        }
    }
    Ok(counts)
}

fn count_part(rows: &[Row], matchers: &mut [Matcher], now: i64) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; matchers.len()];
    if matchers.is_empty() {
        return Ok(counts);
    }
    for row in rows {
        let c = ContactRef::decode(row)?;
        for (m, n) in matchers.iter_mut().zip(counts.iter_mut()) {
            if m.matches(&c, now) {
                *n += 1;
            }
        }
    }
    Ok(counts)
}

/// Calls `f` with the id and email of every contact, and whether each of the two
/// matchers accepts it. Used to diff a segment's membership when its filter changes.
pub fn each_pair(
    store: &dyn Store,
    p: ProjectId,
    before: &mut Matcher,
    after: &mut Matcher,
    now: i64,
    mut f: impl FnMut(ContactId, &str, bool, bool) -> Result<()>,
) -> Result<()> {
    for kv in store.scan(&keys::contacts(p), None, false) {
        let (_, v) = kv?;
        let c = ContactRef::decode(&v)?;
        let (was, is) = (before.matches(&c, now), after.matches(&c, now));
        f(c.id, c.email, was, is)?;
    }
    Ok(())
}

/// The matching contacts, newest first, paged like `GET /contacts`; `total` counts all
/// matches.
pub fn page(
    store: &dyn Store,
    rows: &[Row],
    p: ProjectId,
    m: &mut Matcher,
    page: &PageRequest,
    now: i64,
) -> Result<Page<Contact>> {
    let mut out = items(store, p, m, page, now)?;
    out.total = count(rows, std::slice::from_mut(m), now)?[0];
    Ok(out)
}

/// `page` without the total (0), which is a pass over every contact: an export reads
/// every page and needs none.
pub fn items(
    store: &dyn Store,
    p: ProjectId,
    m: &mut Matcher,
    page: &PageRequest,
    now: i64,
) -> Result<Page<Contact>> {
    let prefix = keys::contacts(p);
    let after = crate::contact::queries::page_start(p, page)?;
    let mut items = Vec::with_capacity(page.limit() + 1);
    for kv in store.scan(&prefix, after.as_deref(), true) {
        let (_, v) = kv?;
        if m.matches(&ContactRef::decode(&v)?, now) {
            items.push(Contact::decode(&v)?);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    Ok(Page::of(items, page, 0, |c| c.id.to_string()))
}

/// Fills `out[i]` with the top-level value named `keys[i]` of the JSON object `data`,
/// skipping every other value without building it, and stopping once all are found.
pub fn pick(data: &str, keys: &[String], out: &mut [Option<Value>]) {
    out.iter_mut().for_each(|o| *o = None);
    if keys.is_empty() || data.len() <= 2 {
        return;
    }
    let mut de = serde_json::Deserializer::from_str(data);
    // Stopping early leaves the rest unread, which serde_json reports as an error;
    // what was picked by then is what we wanted.
    let _ = de.deserialize_map(Pick {
        keys,
        out,
        found: 0,
    });
}

struct Pick<'k, 'o> {
    keys: &'k [String],
    out: &'o mut [Option<Value>],
    found: usize,
}

impl<'de> Visitor<'de> for Pick<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match self.keys.iter().position(|k| *k == key.0) {
                Some(i) => {
                    self.out[i] = Some(map.next_value()?);
                    self.found += 1;
                    if self.found == self.keys.len() {
                        return Ok(());
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A map key that borrows from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pick_takes_only_the_named_keys() {
        let data =
            r#"{"a": {"deep": [1, 2, {"x": "y"}]}, "plan": "pro", "n\u0041me": 3, "z": null}"#;
        let keys = vec!["plan".to_owned(), "nAme".to_owned(), "missing".to_owned()];
        let mut out = vec![Some(json!(0)); 3];
        pick(data, &keys, &mut out);
        assert_eq!(out, [Some(json!("pro")), Some(json!(3)), None]);
        pick("{}", &keys, &mut out);
        assert_eq!(out, [None, None, None]);
    }
}
