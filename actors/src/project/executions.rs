//! Workflow executions as records: started, moved on and ended inside a batch of the
//! project's actor. A leaf, so that both the event path (which starts executions and
//! wakes waiting ones, see `triggers`) and the workflow feature can use it.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{
    ContactId, ExecStatus, Execution, ExecutionId, HistoryEntry, ProjectId, WorkflowId,
};
use crate::scheduler::{Timer, TimerKind};
use crate::store::{codec, keys, Batch, Store};

/// Rung when an execution may have a step to run; the executors then read the ready
/// queue (durable entries only).
pub static READY_SIGNAL: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// An enabled workflow that an event name starts, as the trigger index keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    pub workflow: WorkflowId,
    pub allow_reentry: bool,
    pub first: String,
}

/// A contact's latest execution of a workflow, and whether it is over.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Entered {
    pub execution: ExecutionId,
    pub finished: bool,
}

pub fn load(store: &dyn Store, p: ProjectId, x: ExecutionId) -> Result<Option<Execution>> {
    store
        .get(&keys::execution(p, x))?
        .map(|b| Execution::decode(&b))
        .transpose()
}

pub fn put(batch: &mut Batch, p: ProjectId, e: &Execution) -> Result<()> {
    batch.put(keys::execution(p, e.id), e.encode()?);
    Ok(())
}

pub fn triggers(store: &dyn Store, p: ProjectId, event: &str) -> Result<Vec<Trigger>> {
    match store.get(&keys::triggers(p, event))? {
        Some(b) => codec::decode(&b),
        None => Ok(Vec::new()),
    }
}

pub fn entered(
    store: &dyn Store,
    p: ProjectId,
    w: WorkflowId,
    c: ContactId,
) -> Result<Option<Entered>> {
    store
        .get(&keys::entered(p, w, c))?
        .map(|b| codec::decode(&b))
        .transpose()
}

/// Whether `t` lets this contact in now (API.md section 10): without re-entry, once
/// ever; with it, while no execution of theirs is under way.
pub fn may_enter(store: &dyn Store, p: ProjectId, t: &Trigger, c: ContactId) -> Result<bool> {
    Ok(match entered(store, p, t.workflow, c)? {
        None => true,
        Some(e) => t.allow_reentry && e.finished,
    })
}

/// A new execution of `t` for the contact, RUNNING at the first step and in the
/// ready queue.
pub fn start(
    batch: &mut Batch,
    p: ProjectId,
    t: &Trigger,
    contact: ContactId,
    now: i64,
) -> Result<Execution> {
    let e = Execution {
        id: ExecutionId::new(),
        workflow_id: t.workflow,
        contact_id: contact,
        status: ExecStatus::Running,
        current: Some(t.first.clone()),
        started_at: now,
        completed_at: None,
        history: Vec::new(),
        wait: None,
    };
    put(batch, p, &e)?;
    batch.put(keys::execution_of(p, t.workflow, e.id), Vec::new());
    mark_entered(batch, p, &e)?;
    batch.put(keys::ready(p, e.id), Vec::new());
    Ok(e)
}

fn mark_entered(batch: &mut Batch, p: ProjectId, e: &Execution) -> Result<()> {
    let value = Entered {
        execution: e.id,
        finished: e.status.is_final(),
    };
    batch.put(
        keys::entered(p, e.workflow_id, e.contact_id),
        codec::encode(&value)?,
    );
    Ok(())
}

/// The timer of a waiting execution.
pub fn timer(p: ProjectId, x: ExecutionId, due: i64) -> Timer {
    Timer {
        due,
        kind: TimerKind::Workflow,
        project: p,
        target: *x.as_bytes(),
    }
}

/// Removes what a WAITING execution waits on (its timer, its event index entry).
pub fn clear_wait(batch: &mut Batch, p: ProjectId, e: &mut Execution) {
    if let Some(w) = e.wait.take() {
        batch.delete(timer(p, e.id, w.due).key());
        if let Some(event) = &w.event {
            batch.delete(keys::waiting(p, event, e.contact_id, e.id));
        }
    }
}

/// Moves an execution on to `next` (RUNNING, queued to run) or, with none, ends it
/// COMPLETED; `entry` goes into its history.
pub fn go_on(
    batch: &mut Batch,
    p: ProjectId,
    e: &mut Execution,
    entry: HistoryEntry,
    next: Option<String>,
    now: i64,
) -> Result<()> {
    clear_wait(batch, p, e);
    e.history.push(entry);
    match next {
        Some(step) => {
            e.status = ExecStatus::Running;
            e.current = Some(step);
            batch.put(keys::ready(p, e.id), Vec::new());
        }
        None => end(batch, p, e, ExecStatus::Completed, now)?,
    }
    put(batch, p, e)
}

/// Ends an execution with `status` (the caller writes the record).
pub fn end(
    batch: &mut Batch,
    p: ProjectId,
    e: &mut Execution,
    status: ExecStatus,
    now: i64,
) -> Result<()> {
    clear_wait(batch, p, e);
    e.status = status;
    e.completed_at = Some(now);
    batch.delete(keys::ready(p, e.id));
    mark_entered(batch, p, e)
}

pub fn entry(step: &str, kind: &str, status: &str, now: i64) -> HistoryEntry {
    HistoryEntry {
        step_id: step.to_owned(),
        kind: kind.to_owned(),
        status: status.to_owned(),
        at: now,
        error: None,
        status_code: None,
        branch: None,
    }
}
