//! Layout 5 to 6. Layout 5 counted a workflow's ended executions (`wxf/<workflow>`, what
//! pruning keeps in bounds) only when a step ended them; layout 6 counts every end (a
//! timer, an awaited event, a delete). Each workflow's counter is set to the ended
//! executions it holds. Executions that layout 5 pruned together with their index entry
//! cannot come back: without re-entry, those contacts may enter again once.

use serde::{Deserialize, Serialize};

use super::Slice;
use crate::error::Result;
use crate::model::{ProjectId, WorkflowId};
use crate::store::keys::{self, id_after};
use crate::store::{codec, Batch, Store};
use crate::workflow::executions;

/// The workflow being counted, the last index entry counted and the count so far.
#[derive(Serialize, Deserialize)]
struct Cursor {
    project: ProjectId,
    workflow: WorkflowId,
    after: Option<Vec<u8>>,
    ended: u64,
}

pub fn step(store: &dyn Store, cursor: Option<&[u8]>, slice: usize) -> Result<Slice> {
    let mut at = match cursor {
        Some(b) => codec::decode::<Cursor>(b)?,
        None => match next_workflow(store, None)? {
            Some(at) => at,
            None => return Ok(done(Batch::new(), 0)),
        },
    };
    let (p, w) = (at.project, at.workflow);
    let mut seen = 0usize;
    let mut last = None;
    for kv in store
        .scan(&keys::executions_of(p, w), at.after.as_deref(), false)
        .take(slice)
    {
        let (k, _) = kv?;
        seen += 1;
        if let Some(x) = keys::execution_in(&k) {
            if executions::load(store, p, x)?.is_some_and(|e| e.status.is_final()) {
                at.ended += 1;
            }
        }
        last = Some(k);
    }
    if seen == slice {
        at.after = last;
        return Ok(Slice {
            batch: Batch::new(),
            next: Some(codec::encode(&at)?),
            records: seen as u64,
        });
    }
    let mut batch = Batch::new();
    batch.put(
        keys::counter(p, &executions::finished_counter(w)),
        codec::encode_u64(at.ended),
    );
    match next_workflow(store, Some((p, w)))? {
        Some(next) => Ok(Slice {
            batch,
            next: Some(codec::encode(&next)?),
            records: seen as u64,
        }),
        None => Ok(done(batch, seen)),
    }
}

fn done(batch: Batch, seen: usize) -> Slice {
    Slice {
        batch,
        next: None,
        records: seen as u64,
    }
}

/// The workflow after `after` (in key order, project by project), or the first.
/// Projects without workflows cost one read each.
fn next_workflow(
    store: &dyn Store,
    after: Option<(ProjectId, WorkflowId)>,
) -> Result<Option<Cursor>> {
    let first_of = |p: ProjectId, after: Option<Vec<u8>>| -> Result<Option<Cursor>> {
        let prefix = keys::workflows(p);
        let Some(kv) = store.scan(&prefix, after.as_deref(), false).next() else {
            return Ok(None);
        };
        let (k, _) = kv?;
        Ok(id_after(&k, &prefix).map(|workflow| Cursor {
            project: p,
            workflow,
            after: None,
            ended: 0,
        }))
    };
    let project_after = match after {
        Some((p, w)) => {
            if let Some(next) = first_of(p, Some(keys::workflow(p, w)))? {
                return Ok(Some(next));
            }
            Some(keys::project(p))
        }
        None => None,
    };
    for kv in store.scan(keys::PROJECTS, project_after.as_deref(), false) {
        let (k, _) = kv?;
        let Some(p) = id_after::<ProjectId>(&k, keys::PROJECTS) else {
            continue;
        };
        if let Some(next) = first_of(p, None)? {
            return Ok(Some(next));
        }
    }
    Ok(None)
}
