//! A deleted contact's erasure, workflow phase: its executions (with their waits,
//! timers and ready entries) and its re-entry records.

use crate::contact::erasure_record::{Erasure, Step};
use crate::error::Result;
use crate::model::{ContactId, ProjectId, WorkflowId};
use crate::project::counters::add_to_counter;
use crate::store::{keys, Batch, Store};
use crate::workflow::executions;

/// A workflow at a time: its executions of the contact, then its re-entry record. A
/// workflow with more executions than the slice has room for is finished by the next
/// slice (the deleted ones are gone from its index, so it starts over there).
pub fn executions(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let prefix = keys::workflows(p);
    let mut used = 0;
    let mut last = None;
    for kv in store.scan(&prefix, erasure.after(), false) {
        let (k, _) = kv?;
        let Some(w) = keys::id_after::<WorkflowId>(&k, &prefix) else {
            continue;
        };
        let (n, whole) = executions_of(store, batch, p, w, c, left.saturating_sub(used))?;
        used += n;
        if !whole {
            // Resumes at this workflow: the cursor stays before it.
            let cursor = last.unwrap_or_else(|| erasure.cursor.clone());
            return Ok(Step {
                used,
                cursor: Some(cursor),
            });
        }
        batch.delete(keys::entries(p, w, c));
        used += 1;
        last = Some(k);
        if used >= left {
            return Ok(Step { used, cursor: last });
        }
    }
    Ok(Step { used, cursor: None })
}

/// Deletes up to `left` of the contact's executions of `w`, with what each waits on;
/// answers how many, and whether that was all of them.
fn executions_of(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    w: WorkflowId,
    c: ContactId,
    left: usize,
) -> Result<(usize, bool)> {
    let mut n = 0;
    let mut ended = 0i64;
    for kv in store.scan(&keys::executions_of_contact(p, w, c), None, false) {
        let (k, _) = kv?;
        if n == left {
            add_to_counter(store, batch, p, &executions::finished_counter(w), -ended)?;
            return Ok((n, false));
        }
        batch.delete(k.clone());
        n += 1;
        let Some(x) = keys::execution_in(&k) else {
            continue;
        };
        if let Some(mut e) = executions::load(store, p, x)? {
            if e.status.is_final() {
                // It was counted among the ended ones that pruning keeps in bounds.
                ended += 1;
            }
            executions::clear_wait(batch, p, &mut e);
        }
        batch.delete(keys::ready(p, x));
        batch.delete(keys::execution(p, x));
    }
    if ended > 0 {
        add_to_counter(store, batch, p, &executions::finished_counter(w), -ended)?;
    }
    Ok((n, true))
}
