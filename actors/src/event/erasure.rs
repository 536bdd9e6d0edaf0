//! A deleted contact's erasure, event phases: its events leave the log and both
//! indexes, then its per-name statistics go.

use crate::contact::erasure_record::{walk, Erasure, Step};
use crate::error::Result;
use crate::model::{ContactId, Event, ProjectId};
use crate::project::counters::add_to_counter;
use crate::project::events::EVENTS_COUNTER;
use crate::store::blocks::{self, Id};
use crate::store::{keys, Batch, Store};

/// The newest `left` events of the contact's index leave the log, their name's index
/// and the contact's index; the index itself goes once it is empty.
pub fn events(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    left: usize,
) -> Result<Step> {
    let list = keys::events_by_contact(p, c);
    let ids: Vec<Id> = blocks::iter_rev(store, &list, None)
        .take(left)
        .map(|e| e.map(|(id, _)| id))
        .collect::<Result<_>>()?;
    if ids.is_empty() {
        for kv in store.scan(&list, None, false) {
            batch.delete(kv?.0);
        }
        return Ok(Step {
            used: 1,
            cursor: None,
        });
    }
    let log = keys::events(p);
    let mut by_name: std::collections::BTreeMap<String, Vec<Id>> = Default::default();
    for id in &ids {
        if let Some(bytes) = blocks::get(store, &log, id)? {
            by_name
                .entry(Event::decode(&bytes)?.name)
                .or_default()
                .push(*id);
        }
    }
    let removed = blocks::remove(store, batch, &log, &ids)?;
    for (name, ids) in &by_name {
        blocks::remove(store, batch, &keys::events_by_name(p, name), ids)?;
    }
    blocks::remove(store, batch, &list, &ids)?;
    add_to_counter(store, batch, p, EVENTS_COUNTER, -(removed as i64))?;
    Ok(Step {
        used: ids.len(),
        // Not a position: the events taken are gone from the index, so the next slice
        // starts from its (new) newest.
        cursor: Some(b"events".to_vec()),
    })
}

/// The contact's statistics under every event name the project has seen.
pub fn stats(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let prefix = keys::event_names(p);
    walk(store, &prefix, erasure, left, |k, _| {
        let name = String::from_utf8_lossy(&k[prefix.len()..]);
        batch.delete(keys::contact_event_stats(p, &name, c));
        Ok(())
    })
}
