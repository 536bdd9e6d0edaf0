//! A finished contact import (COMPLETED or FAILED) keeps its record, with up to a thousand
//! rejected rows, so that `GET /contacts/imports/{id}` can still say how it went. Its
//! file's chunks already went when it finished. Once it finished longer ago than
//! `emails_days`, the record goes too (the contacts it wrote stay).

use crate::contact::import::Import;
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{codec, keys, Batch, Store};

use crate::store::Slice;

/// Deletes the records of imports that finished before `before`, walking at most `max`
/// of the project's imports after `after`.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<Slice> {
    let mut batch = Batch::new();
    let mut slice = Slice::default();
    // Every record read counts against `max`, removed or not: a slice is bounded by
    // what it walks, as the other kinds' are.
    for (walked, kv) in store.scan(&keys::imports_of(p), after, false).enumerate() {
        let (k, v) = kv?;
        if walked >= max {
            slice.next = Some(k);
            break;
        }
        let Ok(import) = codec::decode::<Import>(&v) else {
            continue;
        };
        if import.status.is_over() && import.finished_at.is_some_and(|at| at < before) {
            batch.delete(k);
            slice.removed += 1;
        }
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(slice)
}

/// Whether the project has any import record at all (finished ones are what may go).
pub fn due(store: &dyn Store, p: ProjectId) -> Result<bool> {
    Ok(store
        .scan(&keys::imports_of(p), None, false)
        .next()
        .transpose()?
        .is_some())
}
