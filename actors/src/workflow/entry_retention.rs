//! A contact's re-entry window record (`executions::Entries`, one per workflow and
//! contact) counts entries within a day for the re-entry cap. A record whose window
//! began a day or more ago counts as no record at all (the next entry starts a new
//! window), so removing it changes nothing but the store's size.

use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{codec, keys, Batch, Store};
use crate::workflow::executions::Entries;

use crate::store::Slice;

/// Deletes the window records of the project that began a day or more before `now`,
/// walking at most `max` of them after `after`.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    now: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<Slice> {
    let mut batch = Batch::new();
    let mut slice = Slice::default();
    for (walked, kv) in store.scan(&keys::all_entries(p), after, false).enumerate() {
        let (k, v) = kv?;
        if walked >= max {
            slice.next = Some(k);
            break;
        }
        let Ok(n) = codec::decode::<Entries>(&v) else {
            continue;
        };
        if n.is_over(now) {
            batch.delete(k);
            slice.removed += 1;
        }
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(slice)
}

/// Whether the project has any workflow entry window record.
pub fn due(store: &dyn Store, p: ProjectId) -> Result<bool> {
    Ok(store
        .scan(&keys::all_entries(p), None, false)
        .next()
        .transpose()?
        .is_some())
}
