//! Expired events leave the log and its by-name and by-contact indexes. What counts
//! them stays: `GET /events/names` (per-name statistics), the per-contact statistics
//! that segment filters read. The project's event counter drops with them, and each
//! name keeps how many of its events went (`purged_counter`), so that listings' totals
//! count only the events that are left.

use std::collections::BTreeSet;

use crate::error::Result;
use crate::event::queries::purged_counter;
use crate::model::{ContactId, Event, EventId, ProjectId, Timestamp};
use crate::project::counters::add_to_counter;
use crate::project::events::EVENTS_COUNTER;
use crate::store::{blocks, keys, Batch, Store};

/// Removes up to `max` events older than `before` (by their time, which their ids
/// carry), and answers how many went.
pub fn purge(store: &dyn Store, p: ProjectId, before: Timestamp, max: usize) -> Result<usize> {
    let cutoff = EventId::floor(before);
    let mut batch = Batch::new();
    let gone = blocks::remove_below(store, &mut batch, &keys::events(p), cutoff.as_bytes(), max)?;
    let Some(newest) = gone.last().map(|e| e.0) else {
        return Ok(0);
    };
    // The indexes lose the same events: everything below the newest one removed.
    let bound = (u128::from_be_bytes(newest).saturating_add(1)).to_be_bytes();
    let mut names: std::collections::BTreeMap<String, i64> = Default::default();
    let mut contacts = BTreeSet::<ContactId>::new();
    for (_, bytes) in &gone {
        // An event that cannot be read has its index entries left behind; a listing
        // skips an index entry whose event is gone.
        if let Ok(e) = Event::decode(bytes) {
            *names.entry(e.name).or_default() += 1;
            contacts.insert(e.contact_id);
        }
    }
    for name in names.keys() {
        let prefix = keys::events_by_name(p, name);
        blocks::remove_below(store, &mut batch, &prefix, &bound, usize::MAX)?;
    }
    for c in contacts {
        let prefix = keys::events_by_contact(p, c);
        blocks::remove_below(store, &mut batch, &prefix, &bound, usize::MAX)?;
    }
    for (name, n) in &names {
        add_to_counter(store, &mut batch, p, &purged_counter(name), *n)?;
    }
    add_to_counter(store, &mut batch, p, EVENTS_COUNTER, -(gone.len() as i64))?;
    store.apply(batch)?;
    Ok(gone.len())
}

/// Whether anything may be old enough to remove: a cheap read, off the actor.
pub fn due(store: &dyn Store, p: ProjectId, before: Timestamp) -> Result<bool> {
    let oldest = blocks::oldest(store, &keys::events(p))?;
    Ok(oldest.is_some_and(|id| id < *EventId::floor(before).as_bytes()))
}
