//! Workflow executions as records: started, moved on and ended inside a batch of the
//! project's actor. A leaf, so that both the event path (which starts executions and
//! wakes waiting ones, see `triggers`) and the workflow feature can use it.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::metrics::{ExecutionMove, Metrics};
use crate::model::{
    ContactId, ExecStatus, Execution, ExecutionId, HistoryEntry, ProjectId, WorkflowId,
};
pub use crate::project::wakeups::Wakeups;
use crate::scheduler::{Timer, TimerKind};
use crate::store::{codec, keys, Batch, Store};

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
/// ever; with it, while no execution of theirs is under way, and at most
/// `starts.max_entries_per_day()` times a day window (workflows that trigger each other
/// through the events their steps cause, e.g. one on `contact.subscribed` that
/// unsubscribes and one on `contact.unsubscribed` that subscribes, stop there).
pub fn may_enter(
    store: &dyn Store,
    wakeups: &Wakeups,
    p: ProjectId,
    t: &Trigger,
    c: ContactId,
    now: i64,
) -> Result<bool> {
    let prefix = keys::executions_of_contact(p, t.workflow, c);
    if !t.allow_reentry {
        // Forward: a reverse range read costs more, and only re-entry needs the last.
        return Ok(store.scan(&prefix, None, false).next().is_none());
    }
    let max = wakeups.max_entries_per_day();
    if Entries::load(store, p, t.workflow, c)?.at(now).count >= max {
        return Ok(false);
    }
    // Pruning may have dropped every entry of the index: then none is under way.
    match store.scan(&prefix, None, true).next() {
        None => Ok(true),
        Some(kv) => Ok(match keys::execution_in(&kv?.0) {
            Some(x) => load(store, p, x)?.is_none_or(|e| e.status.is_final()),
            None => true,
        }),
    }
}

const DAY_MS: i64 = 86_400_000;

/// A contact's entries into one re-entry workflow since `since`: one small record per
/// (workflow, contact), rewritten on each entry, so the cap holds whatever pruning
/// drops and however many contacts a loop carries. A window starts at the first entry
/// once the last window is a day old; counting per window, not per sliding day, keeps
/// the record one pair of numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Entries {
    pub since: i64,
    pub count: u32,
}

impl Entries {
    pub fn load(store: &dyn Store, p: ProjectId, w: WorkflowId, c: ContactId) -> Result<Self> {
        match store.get(&keys::entries(p, w, c))? {
            Some(b) => codec::decode(&b),
            None => Ok(Entries::default()),
        }
    }

    /// Whether the window began a day or more before `now`: the record then counts as
    /// none (retention removes it).
    pub fn is_over(self, now: i64) -> bool {
        now.saturating_sub(self.since) >= DAY_MS
    }

    /// The window as it stands at `now`: a new, empty one once a day has passed.
    pub fn at(self, now: i64) -> Self {
        match self.is_over(now) {
            true => Entries {
                since: now,
                count: 0,
            },
            false => self,
        }
    }
}

/// Counts one more entry of the contact into a re-entry workflow.
fn count_entry(
    store: &dyn Store,
    max: u32,
    batch: &mut Batch,
    p: ProjectId,
    t: &Trigger,
    c: ContactId,
    now: i64,
) -> Result<()> {
    let mut n = Entries::load(store, p, t.workflow, c)?.at(now);
    n.count = n.count.saturating_add(1);
    // Once a window, not on every refusal: a loop would fill the log instead.
    if n.count == max {
        tracing::warn!(project = %p, workflow = %t.workflow, contact = %c,
            "a contact entered this workflow {max} times within a day; not again until the day has passed");
    }
    batch.put(keys::entries(p, t.workflow, c), codec::encode(&n)?);
    Ok(())
}

/// A new execution of `t` for the contact: RUNNING at the first step and in the ready
/// queue, or, when the first step is a wait, WAITING with its timer armed. (Armed
/// before the batch is durable: a timer that fires early finds the execution through
/// the actor, which has applied the batch; one lost in a crash is lost with it.)
pub fn start(
    store: &dyn Store,
    wakeups: &Wakeups,
    batch: &mut Batch,
    p: ProjectId,
    t: &Trigger,
    contact: ContactId,
    now: i64,
) -> Result<Execution> {
    if t.allow_reentry {
        count_entry(
            store,
            wakeups.max_entries_per_day(),
            batch,
            p,
            t,
            contact,
            now,
        )?;
    }
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
            wakeups.arm_after_write(timer);
        }
        None => batch.put(keys::ready(p, e.id), Vec::new()),
    }
    put(batch, p, &e)?;
    // Counted as the batch is made: a store batch is applied whole or the process stops.
    wakeups.metrics().execution(ExecutionMove::Started);
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
/// COMPLETED at the time of `entry`, which goes into its history.
pub fn go_on(
    store: &dyn Store,
    metrics: &Metrics,
    batch: &mut Batch,
    p: ProjectId,
    e: &mut Execution,
    entry: HistoryEntry,
    next: Option<String>,
) -> Result<()> {
    clear_wait(batch, p, e);
    let now = entry.at;
    e.history.push(entry);
    match next {
        Some(step) => {
            e.status = ExecStatus::Running;
            e.current = Some(step);
            batch.put(keys::ready(p, e.id), Vec::new());
        }
        None => end(store, metrics, batch, p, e, ExecStatus::Completed, now)?,
    }
    put(batch, p, e)
}

/// The counter of a workflow's ended executions (what pruning keeps in bounds).
pub fn finished_counter(w: WorkflowId) -> String {
    keys::finished_executions(w)
}

/// Ends an execution with `status` (the caller writes the record), and counts it.
pub fn end(
    store: &dyn Store,
    metrics: &Metrics,
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
    metrics.execution(ExecutionMove::Ended(status));
    crate::project::counters::add_to_counter(store, batch, p, &finished_counter(e.workflow_id), 1)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::wakeups::MAX_ENTRIES_PER_DAY;
    use crate::store::SledStore;

    fn reentry(w: WorkflowId) -> Trigger {
        Trigger {
            workflow: w,
            allow_reentry: true,
            first: "a".into(),
            wait: None,
        }
    }

    /// Starts an execution of `t` for `c` at `now` and ends it at once.
    fn enter_and_end(
        store: &dyn Store,
        wakeups: &Wakeups,
        p: ProjectId,
        t: &Trigger,
        c: ContactId,
        now: i64,
    ) {
        let mut batch = Batch::new();
        let mut e = start(store, wakeups, &mut batch, p, t, c, now).unwrap();
        end(
            store,
            &Metrics::default(),
            &mut batch,
            p,
            &mut e,
            ExecStatus::Completed,
            now,
        )
        .unwrap();
        put(&mut batch, p, &e).unwrap();
        store.apply(batch).unwrap();
    }

    #[test]
    fn the_daily_cap_holds_after_pruning_drops_every_index_entry_and_opens_a_day_later() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let (p, c, t) = (
            ProjectId::new(),
            ContactId::new(),
            reentry(WorkflowId::new()),
        );
        let now = 1_000_000;
        let wakeups = Wakeups::default();
        for i in 0..MAX_ENTRIES_PER_DAY {
            assert!(may_enter(&*store, &wakeups, p, &t, c, now + i64::from(i)).unwrap());
            enter_and_end(&*store, &wakeups, p, &t, c, now + i64::from(i));
        }
        let mut batch = Batch::new();
        for kv in store.scan(&keys::executions_of(p, t.workflow), None, false) {
            batch.delete(kv.unwrap().0);
        }
        store.apply(batch).unwrap();
        assert!(
            !may_enter(&*store, &wakeups, p, &t, c, now + 1_000).unwrap(),
            "the cap still holds with the index pruned"
        );
        assert!(
            may_enter(&*store, &wakeups, p, &t, c, now + DAY_MS).unwrap(),
            "a day after the window began, the contact may enter again"
        );
        enter_and_end(&*store, &wakeups, p, &t, c, now + DAY_MS);
        let window = Entries::load(&*store, p, t.workflow, c).unwrap();
        assert_eq!(
            window,
            Entries {
                since: now + DAY_MS,
                count: 1
            }
        );
    }

    #[test]
    fn two_engines_in_one_process_each_apply_their_own_daily_cap() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let (strict, lenient) = (
            Wakeups::new(2, Default::default()),
            Wakeups::new(5, Default::default()),
        );
        let now = 1_000_000;
        let p = ProjectId::new();
        let (strict_contact, lenient_contact) = (ContactId::new(), ContactId::new());
        let t = reentry(WorkflowId::new());
        let entered = |wakeups: &Wakeups, c: ContactId| {
            let mut n = 0;
            while n < 10 && may_enter(&*store, wakeups, p, &t, c, now + n).unwrap() {
                enter_and_end(&*store, wakeups, p, &t, c, now + n);
                n += 1;
            }
            n
        };
        assert_eq!(entered(&strict, strict_contact), 2);
        assert_eq!(entered(&lenient, lenient_contact), 5);
        assert_eq!(
            entered(&strict, strict_contact),
            0,
            "the lenient engine's cap did not replace the strict one's"
        );
    }

    #[test]
    fn a_waiting_execution_notes_its_timer_for_its_own_engine_only_and_arms_none_yet() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let (mine, other) = (Wakeups::default(), Wakeups::default());
        let mut t = reentry(WorkflowId::new());
        t.wait = Some(FirstWait {
            ms: 60_000,
            event: None,
            next: Some("b".into()),
            timeout_next: None,
        });
        let mut batch = Batch::new();
        let e = start(
            &*store,
            &mine,
            &mut batch,
            ProjectId::new(),
            &t,
            ContactId::new(),
            0,
        );
        assert_eq!(e.unwrap().status, ExecStatus::Waiting);
        assert_eq!(
            mine.timers().len(),
            0,
            "not armed before the batch is durable"
        );
        assert_eq!(mine.take_noted().timers.len(), 1);
        assert_eq!(other.take_noted().timers.len(), 0);
    }
}
