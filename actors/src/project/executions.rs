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

/// The executions just put in the ready queue (not yet durable, maybe), so that the
/// executors look at these rather than walk the whole queue after every event.
static READY_HINTS: std::sync::Mutex<Vec<(ProjectId, ExecutionId)>> =
    std::sync::Mutex::new(Vec::new());

/// Notes executions put in the ready queue, and wakes the executors.
pub fn hint_ready(ready: &[(ProjectId, ExecutionId)]) {
    if ready.is_empty() {
        return;
    }
    READY_HINTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend_from_slice(ready);
    READY_SIGNAL.notify_one();
}

/// Takes the noted executions.
pub fn take_hints() -> Vec<(ProjectId, ExecutionId)> {
    std::mem::take(&mut *READY_HINTS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// An enabled workflow that an event name starts, as the trigger index keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    pub workflow: WorkflowId,
    pub allow_reentry: bool,
    pub first: String,
    /// When the first step is a DELAY or a WAIT_FOR_EVENT, the wait it starts: the
    /// execution then begins WAITING, in the event's own batch, with no executor turn.
    pub wait: Option<FirstWait>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstWait {
    pub ms: i64,
    pub event: Option<String>,
    pub next: Option<String>,
    pub timeout_next: Option<String>,
}

/// The Scheduler's timers, for executions that begin waiting (set once at start-up).
static TIMERS: std::sync::OnceLock<std::sync::Arc<crate::scheduler::Timers>> =
    std::sync::OnceLock::new();

pub fn set_timers(timers: std::sync::Arc<crate::scheduler::Timers>) {
    let _ = TIMERS.set(timers);
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

/// Whether `t` lets this contact in now (API.md section 10): without re-entry, once
/// ever; with it, while no execution of theirs is under way.
pub fn may_enter(
    store: &dyn Store,
    p: ProjectId,
    t: &Trigger,
    c: ContactId,
    now: i64,
) -> Result<bool> {
    let prefix = keys::executions_of_contact(p, t.workflow, c);
    // Forward first: a reverse range read costs more, and only re-entry needs the last.
    if store.scan(&prefix, None, false).next().is_none() {
        return Ok(true);
    }
    if !t.allow_reentry {
        return Ok(false);
    }
    // Newest first: the last must have ended, and no more than MAX_ENTRIES_PER_DAY
    // may have started within a day (workflows that trigger each other through the
    // events their steps cause, e.g. one on `contact.subscribed` that unsubscribes and
    // one on `contact.unsubscribed` that subscribes, stop there).
    let day_ago = now - 86_400_000;
    for (i, kv) in store.scan(&prefix, None, true).enumerate() {
        let Some(x) = keys::execution_in(&kv?.0) else {
            continue;
        };
        if i == 0 && !load(store, p, x)?.is_none_or(|e| e.status.is_final()) {
            return Ok(false);
        }
        if started_at(x) < day_ago {
            return Ok(true);
        }
        if i + 1 >= MAX_ENTRIES_PER_DAY {
            tracing::warn!(project = %p, workflow = %t.workflow, contact = %c,
                "a contact entered this workflow {MAX_ENTRIES_PER_DAY} times within a day; not again until a day has passed");
            return Ok(false);
        }
    }
    Ok(true)
}

/// Executions of one workflow one contact may start within a day (re-entry).
pub const MAX_ENTRIES_PER_DAY: usize = 100;

/// When an execution started, from its id (UUID v7 carries its creation time).
fn started_at(x: ExecutionId) -> i64 {
    x.as_uuid()
        .get_timestamp()
        .map(|t| {
            let (s, n) = t.to_unix();
            (s as i64) * 1_000 + i64::from(n / 1_000_000)
        })
        .unwrap_or(0)
}

/// A new execution of `t` for the contact: RUNNING at the first step and in the ready
/// queue, or, when the first step is a wait, WAITING with its timer armed. (Armed
/// before the batch is durable: a timer that fires early finds the execution through
/// the actor, which has applied the batch; one lost in a crash is lost with it.)
pub fn start(
    batch: &mut Batch,
    p: ProjectId,
    t: &Trigger,
    contact: ContactId,
    now: i64,
) -> Result<Execution> {
    let mut e = Execution {
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
    batch.put(keys::execution_of(p, t.workflow, contact, e.id), Vec::new());
    match &t.wait {
        Some(w) => {
            let wait = crate::model::Wait {
                due: now.saturating_add(w.ms),
                event: w.event.clone(),
                next: w.next.clone(),
                timeout_next: w.timeout_next.clone(),
            };
            let timer = timer(p, e.id, wait.due);
            batch.put(timer.key(), Vec::new());
            if let Some(event) = &wait.event {
                batch.put(keys::waiting(p, event, contact, e.id), Vec::new());
            }
            e.status = ExecStatus::Waiting;
            e.wait = Some(wait);
            if let Some(timers) = TIMERS.get() {
                timers.arm(timer);
            }
        }
        None => batch.put(keys::ready(p, e.id), Vec::new()),
    }
    put(batch, p, &e)?;
    // Counted as the batch is made: a store batch is applied whole or the process stops.
    crate::metrics::ExecutionMove::Started.count();
    Ok(e)
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
    store: &dyn Store,
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
        None => end(store, batch, p, e, ExecStatus::Completed, now)?,
    }
    put(batch, p, e)
}

/// The counter of a workflow's ended executions (what pruning keeps in bounds).
pub fn finished_counter(w: WorkflowId) -> String {
    format!("wxf/{w}")
}

/// Ends an execution with `status` (the caller writes the record), and counts it.
pub fn end(
    store: &dyn Store,
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
    crate::metrics::ExecutionMove::Ended(status).count();
    super::counters::add_to_counter(store, batch, p, &finished_counter(e.workflow_id), 1)
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
