//! Appending events to a batch: the record (in the event log's blocks, see
//! `store::blocks`), its by-contact and by-name index entries (in blocks too),
//! the per-name statistics that `GET /events/names` serves, the per-contact-per-name
//! statistics that segment filters read, and the project's event counter.
//!
//! Every event of one write goes through one `append_all`, which adds up the
//! statistics in memory first: two events of the same name in one batch must count
//! twice, and a batch cannot read its own writes.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::write::WriteCtx;
use crate::error::Result;
use crate::model::{ContactId, Event, EventStats, ProjectId};
use crate::store::blocks::{self, Blocks};
use crate::store::{codec, keys, Batch, Store};

pub const EVENTS_COUNTER: &str = "events";

/// The event log: a few events a block (an event is ~100 bytes; a large one gets a
/// block of its own), since each new event writes its whole block to the write-ahead
/// log again. Under /v1/track, 4 a block wrote ~1.35 KB of log per request (measured;
/// 8 a block would be ~1.7 KB by the block sizes) at the same throughput as 8 (the
/// mover folds the rewrites either way).
pub const EVENT_BLOCKS: Blocks = Blocks {
    max_entries: 4,
    max_bytes: 4096,
};

/// The by-name and by-contact indexes hold bare ids (20 bytes an entry), so their
/// blocks can be longer.
pub const INDEX_BLOCKS: Blocks = Blocks {
    max_entries: 16,
    max_bytes: 4096,
};

fn read_stats(store: &dyn Store, key: &[u8]) -> Result<EventStats> {
    Ok(match store.get(key)? {
        Some(bytes) => codec::decode(&bytes)?,
        None => EventStats::default(),
    })
}

/// Adds `events` to `batch`, and what the features do on them (the after-events hooks:
/// the workflows they start or wake), in the same batch. Callers are the project's
/// actor, so the read-modify-write of the statistics cannot race with another writer of
/// the same project.
pub fn append_all(ctx: &WriteCtx, batch: &mut Batch, events: &[Event]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    append(ctx.store, batch, ctx.project, events)?;
    let hooked = super::hooks::EventsCtx {
        store: ctx.store,
        project: ctx.project,
        states: ctx.states,
        wakeups: ctx.wakeups,
    };
    ctx.hooks.run_after_events(&hooked, batch, events)
}

/// Adds `events` to `batch`, the record and its statistics only: no hook runs.
pub fn append(store: &dyn Store, batch: &mut Batch, p: ProjectId, events: &[Event]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut names: HashMap<&str, EventStats> = HashMap::new();
    let mut per_contact: HashMap<(&str, ContactId), EventStats> = HashMap::new();
    let mut log = Vec::with_capacity(events.len());
    let mut by_name: HashMap<&str, Vec<blocks::Entry>> = HashMap::new();
    let mut by_contact: HashMap<ContactId, Vec<blocks::Entry>> = HashMap::new();
    for e in events {
        let id = *e.id.as_bytes();
        log.push((id, e.encode()?));
        by_name.entry(&e.name).or_default().push((id, Vec::new()));
        by_contact
            .entry(e.contact_id)
            .or_default()
            .push((id, Vec::new()));
        let at = e.created_at.millis();
        let name_stats = match names.entry(&e.name) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert(read_stats(store, &keys::event_name(p, &e.name))?),
        };
        name_stats.add(at);
        let contact_stats = match per_contact.entry((&e.name, e.contact_id)) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert(read_stats(
                store,
                &keys::contact_event_stats(p, &e.name, e.contact_id),
            )?),
        };
        contact_stats.add(at);
    }
    EVENT_BLOCKS.insert(store, batch, &keys::events(p), log)?;
    for (name, ids) in by_name {
        INDEX_BLOCKS.insert(store, batch, &keys::events_by_name(p, name), ids)?;
    }
    for (contact, ids) in by_contact {
        INDEX_BLOCKS.insert(store, batch, &keys::events_by_contact(p, contact), ids)?;
    }
    for (name, st) in names {
        batch.put(keys::event_name(p, name), codec::encode(&st)?);
    }
    for ((name, contact), st) in per_contact {
        batch.put(
            keys::contact_event_stats(p, name, contact),
            codec::encode(&st)?,
        );
    }
    let total = super::counters::read_counter(store, p, EVENTS_COUNTER)?;
    batch.put(
        keys::counter(p, EVENTS_COUNTER),
        codec::encode_u64(total + events.len() as u64),
    );
    Ok(())
}

/// One contact's statistics for each of `names` (None where it never triggered).
pub fn contact_stats(
    store: &dyn Store,
    p: ProjectId,
    contact: ContactId,
    names: &[String],
) -> Result<Vec<Option<EventStats>>> {
    names
        .iter()
        .map(|n| {
            store
                .get(&keys::contact_event_stats(p, n, contact))?
                .map(|b| codec::decode::<EventStats>(&b))
                .transpose()
        })
        .collect()
}

/// Every contact that triggered `name`, with its statistics: one entry per contact.
pub fn stats_by_contact(
    store: &dyn Store,
    p: ProjectId,
    name: &str,
) -> Result<HashMap<ContactId, EventStats>> {
    let prefix = keys::contact_event_stats_by_name(p, name);
    let mut out = HashMap::new();
    for kv in store.scan(&prefix, None, false) {
        let (k, v) = kv?;
        if let Some(id) = keys::id_after::<ContactId>(&k, &prefix) {
            out.insert(id, codec::decode::<EventStats>(&v)?);
        }
    }
    Ok(out)
}
