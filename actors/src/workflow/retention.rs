//! Ended workflow executions older than `executions_days` (by their stored
//! `completed_at`, which follows the injected clock) leave the execution listings and
//! lookups. As with `workflows.max_finished_executions`, a workflow without re-entry
//! keeps the contact's index entry: it is what keeps the contact from entering again.

use std::collections::HashMap;

use crate::error::Result;
use crate::model::{Execution, ExecutionId, ProjectId, WorkflowId};
use crate::project::counters::add_to_counter;
use crate::store::{keys, Batch, Store};
use crate::workflow::{executions, records as workflows};

use crate::store::Slice;

/// Walks at most `max` execution records after `after`, deleting those that ended
/// before `before`. The walk is in start order and stops at the first execution
/// started at or after `before`: none after it can have ended earlier.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<Slice> {
    let prefix = keys::executions(p);
    let mut batch = Batch::new();
    let mut slice = Slice::default();
    let mut reentry: HashMap<WorkflowId, bool> = HashMap::new();
    let mut ended: HashMap<WorkflowId, i64> = HashMap::new();
    for (walked, kv) in store.scan(&prefix, after, false).enumerate() {
        let (k, v) = kv?;
        if walked == max {
            slice.next = Some(k);
            break;
        }
        if keys::id_after::<ExecutionId>(&k, &prefix).is_none() {
            continue;
        }
        let Ok(e) = Execution::decode(&v) else {
            continue;
        };
        if e.started_at >= before {
            break;
        }
        if e.completed_at.is_none_or(|at| at >= before) || !e.status.is_final() {
            continue;
        }
        let allows = match reentry.get(&e.workflow_id) {
            Some(a) => *a,
            None => {
                let a = workflows::load(store, p, e.workflow_id)?.is_some_and(|w| w.allow_reentry);
                *reentry.entry(e.workflow_id).or_insert(a)
            }
        };
        if allows {
            batch.delete(keys::execution_of(p, e.workflow_id, e.contact_id, e.id));
        }
        batch.delete(k);
        *ended.entry(e.workflow_id).or_default() += 1;
        slice.removed += 1;
    }
    for (w, n) in ended {
        add_to_counter(store, &mut batch, p, &executions::finished_counter(w), -n)?;
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(slice)
}

/// Whether anything may be old enough to remove: a cheap read, off the actor.
pub fn due(store: &dyn Store, p: ProjectId, before: i64) -> Result<bool> {
    match store.scan(&keys::executions(p), None, false).next() {
        Some(kv) => Ok(Execution::decode(&kv?.1).is_ok_and(|e| e.started_at < before)),
        None => Ok(false),
    }
}
