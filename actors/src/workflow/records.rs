//! Workflow writes and reads (API.md section 10), and the moves of their executions
//! that the executors make: each runs in the project's actor (`apply::Apply`), guarded
//! by the step it expects the execution to be at, so a step that ran twice (a crash, a
//! timer and an event at once) moves the execution once.

use super::executions::{self, Trigger};
use crate::contact::records::{
    self as contacts, read_counter, PatchContact, ProjectCounts, WriteCtx,
};
use crate::error::{Error, FieldCode, Resource, Result};
use crate::model::{
    DataPatch, ExecStatus, Execution, ExecutionId, HistoryEntry, Page, PageRequest, ProjectId,
    StepKind, Wait, Workflow, WorkflowId,
};
use crate::project::counters::add_to_counter;
use crate::project::limits;
use crate::scheduler::Timer;
use crate::store::{codec, keys, paging, Batch, Store};
use crate::template::records as templates;

pub const WORKFLOWS_COUNTER: &str = "workflows";
/// Enabled workflows one event name may start: each is an execution written in the
/// event's own batch.
pub const MAX_PER_EVENT: usize = 20;

pub fn load(store: &dyn Store, p: ProjectId, id: WorkflowId) -> Result<Option<Workflow>> {
    store
        .get(&keys::workflow(p, id))?
        .map(|b| Workflow::decode(&b))
        .transpose()
}

pub fn get(store: &dyn Store, p: ProjectId, id: WorkflowId) -> Result<Workflow> {
    load(store, p, id)?.ok_or(Error::NotFound(Resource::Workflow))
}

fn parse_cursor<T: std::str::FromStr>(page: &PageRequest) -> Result<Option<T>> {
    page.cursor()
        .map(|c| {
            c.parse()
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))
        })
        .transpose()
}

/// Newest first; the cursor is the id of the last workflow of the previous page.
/// Every workflow of a project, oldest first, read as the walk goes (an export).
pub fn each(store: &dyn Store, p: ProjectId) -> impl Iterator<Item = Result<Workflow>> + '_ {
    store
        .scan(&keys::workflows(p), None, false)
        .map(|kv| Workflow::decode(&kv?.1))
}

pub fn list(store: &dyn Store, p: ProjectId, page: &PageRequest) -> Result<Page<Workflow>> {
    let total = read_counter(store, p, WORKFLOWS_COUNTER)?;
    paging::newest_first(
        store,
        &keys::workflows(p),
        page,
        total,
        Workflow::decode,
        |w| w.id.to_string(),
    )
}

/// A workflow's executions, every one (oldest first); the index is by contact, so
/// this reads them all and sorts.
fn all_executions(
    store: &dyn Store,
    p: ProjectId,
    w: WorkflowId,
) -> Result<Vec<(Vec<u8>, Execution)>> {
    let mut all = Vec::new();
    for kv in store.scan(&keys::executions_of(p, w), None, false) {
        let (k, _) = kv?;
        let Some(x) = keys::execution_in(&k) else {
            continue;
        };
        if let Some(e) = executions::load(store, p, x)? {
            all.push((k, e));
        }
    }
    all.sort_by_key(|(_, e)| e.id);
    Ok(all)
}

/// A workflow's executions, newest first, with `status` if given; `total` counts the
/// matching ones.
pub fn executions(
    store: &dyn Store,
    p: ProjectId,
    w: WorkflowId,
    status: Option<ExecStatus>,
    page: &PageRequest,
) -> Result<Page<Execution>> {
    let after = parse_cursor::<ExecutionId>(page)?;
    let matching: Vec<Execution> = all_executions(store, p, w)?
        .into_iter()
        .rev()
        .map(|(_, e)| e)
        .filter(|e| status.is_none_or(|s| s == e.status))
        .collect();
    let total = matching.len() as u64;
    let items: Vec<Execution> = matching
        .into_iter()
        .filter(|e| after.is_none_or(|a| e.id < a))
        .take(page.limit() + 1)
        .collect();
    Ok(Page::of(items, page, total, |e| e.id.to_string()))
}

pub fn execution(
    store: &dyn Store,
    p: ProjectId,
    w: WorkflowId,
    x: ExecutionId,
) -> Result<Execution> {
    executions::load(store, p, x)?
        .filter(|e| e.workflow_id == w)
        .ok_or(Error::NotFound(Resource::Execution))
}

/// Every template a SEND_EMAIL step names exists (404 `TEMPLATE_NOT_FOUND`).
fn check_templates(store: &dyn Store, p: ProjectId, w: &Workflow) -> Result<()> {
    for s in &w.steps {
        if let StepKind::SendEmail { template_id } = &s.kind {
            if templates::load(store, p, *template_id)?.is_none() {
                return Err(Error::NotFound(Resource::Template));
            }
        }
    }
    Ok(())
}

/// Rewrites the trigger index of `names`: the enabled workflows each one starts, from
/// the stored workflows, with `changed` as it is now and `removed` left out.
fn reindex(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    names: &[&str],
    changed: Option<&Workflow>,
    removed: Option<WorkflowId>,
) -> Result<()> {
    let mut all = Vec::new();
    for kv in store.scan(&keys::workflows(p), None, false) {
        let w = Workflow::decode(&kv?.1)?;
        if Some(w.id) != removed && changed.is_none_or(|c| c.id != w.id) {
            all.push(w);
        }
    }
    all.extend(changed.cloned());
    for name in names {
        let list: Vec<Trigger> = all
            .iter()
            .filter(|w| w.enabled && w.trigger_event == *name)
            .filter_map(|w| {
                let first = w.first()?;
                Some(Trigger {
                    workflow: w.id,
                    allow_reentry: w.allow_reentry,
                    first: first.id.clone(),
                    wait: first_wait(first),
                })
            })
            .collect();
        if list.len() > MAX_PER_EVENT {
            return Err(Error::Conflict {
                message: format!(
                    "{MAX_PER_EVENT} enabled workflows already start on the event {name:?}, the most one event may start"
                ),
                suggestion: Some("Disable one of them, or combine their steps".into()),
            });
        }
        match list.is_empty() {
            true => batch.delete(keys::triggers(p, name)),
            false => batch.put(keys::triggers(p, name), codec::encode(&list)?),
        }
    }
    Ok(())
}

/// The wait a first step starts, when it is one.
fn first_wait(s: &crate::model::Step) -> Option<executions::FirstWait> {
    match &s.kind {
        StepKind::Delay { amount, unit } => Some(executions::FirstWait {
            ms: (*amount as i64).saturating_mul(unit.millis()),
            event: None,
            next: s.next.clone(),
            timeout_next: None,
        }),
        StepKind::WaitForEvent {
            event_name,
            timeout_seconds,
        } => Some(executions::FirstWait {
            ms: (*timeout_seconds as i64).saturating_mul(1_000),
            event: Some(event_name.clone()),
            next: s.next.clone(),
            timeout_next: s.timeout_next.clone(),
        }),
        _ => None,
    }
}

pub fn create(ctx: &WriteCtx, w: Workflow) -> Result<Workflow> {
    let (store, p) = (ctx.store, ctx.project);
    let max = ctx.limits.max_workflows;
    if read_counter(store, p, WORKFLOWS_COUNTER)? >= max {
        return Err(limits::full("workflows", max, "max_workflows"));
    }
    check_templates(store, p, &w)?;
    let mut batch = Batch::new();
    batch.put(keys::workflow(p, w.id), w.encode()?);
    add_to_counter(store, &mut batch, p, WORKFLOWS_COUNTER, 1)?;
    reindex(store, &mut batch, p, &[&w.trigger_event], Some(&w), None)?;
    store.apply(batch)?;
    Ok(w)
}

/// The fields a PATCH may change; None leaves a field as it is.
#[derive(Debug, Default)]
pub struct WorkflowPatch {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub enabled: Option<bool>,
    pub trigger_event: Option<String>,
    pub allow_reentry: Option<bool>,
    pub steps: Option<Vec<crate::model::Step>>,
}

pub fn update(ctx: &WriteCtx, id: WorkflowId, patch: WorkflowPatch) -> Result<Workflow> {
    let (store, p) = (ctx.store, ctx.project);
    let mut w = get(store, p, id)?;
    let old_trigger = w.trigger_event.clone();
    let new_steps = patch.steps.is_some();
    macro_rules! set {
        ($($field:ident),*) => {$(if let Some(v) = patch.$field { w.$field = v; })*};
    }
    set!(
        name,
        description,
        enabled,
        trigger_event,
        allow_reentry,
        steps
    );
    w.updated_at = ctx.now.millis();
    // Only new steps are checked: a workflow whose template was deleted since can still
    // be disabled or renamed.
    if new_steps {
        check_templates(store, p, &w)?;
    }
    let mut batch = Batch::new();
    batch.put(keys::workflow(p, w.id), w.encode()?);
    reindex(
        store,
        &mut batch,
        p,
        &[&old_trigger, &w.trigger_event],
        Some(&w),
        None,
    )?;
    store.apply(batch)?;
    Ok(w)
}

/// Deletes a workflow and cancels its executions: those running or waiting stop
/// (their timers and waits go), and its executions' records go with it.
pub fn delete(ctx: &WriteCtx, id: WorkflowId) -> Result<()> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now.millis());
    let w = get(store, p, id)?;
    let mut batch = Batch::new();
    let mut cancelled = 0u64;
    for (k, mut e) in all_executions(store, p, id)? {
        batch.delete(k);
        if !e.status.is_final() {
            executions::end(
                store,
                ctx.metrics,
                &mut batch,
                p,
                &mut e,
                ExecStatus::Cancelled,
                now,
            )?;
            cancelled += 1;
        }
        batch.delete(keys::execution(p, e.id));
    }
    for kv in store.scan(&keys::entries_of(p, id), None, false) {
        batch.delete(kv?.0);
    }
    batch.delete(keys::workflow(p, id));
    batch.delete(keys::counter(p, &executions::finished_counter(id)));
    add_to_counter(store, &mut batch, p, WORKFLOWS_COUNTER, -1)?;
    reindex(store, &mut batch, p, &[&w.trigger_event], None, Some(id))?;
    store.apply(batch)?;
    tracing::info!(project = %p, workflow = %id, cancelled, "workflow deleted");
    Ok(())
}

/// The execution, if it is RUNNING at `step`: what every executor move expects.
fn running_at(
    store: &dyn Store,
    p: ProjectId,
    x: ExecutionId,
    step: &str,
) -> Result<Option<Execution>> {
    Ok(executions::load(store, p, x)?
        .filter(|e| e.status == ExecStatus::Running && e.current.as_deref() == Some(step)))
}

/// Keeps the newest `max` history entries.
fn trim(e: &mut Execution, max: usize) {
    let over = e.history.len().saturating_sub(max.max(1));
    e.history.drain(..over);
}

/// Once a workflow holds half again more ended executions than
/// `workflows.max_finished_executions` (`executions::end` counts them), drops the oldest
/// ended ones down to it, in one pass now and then (the index is by contact, not age).
/// Without re-entry, a dropped execution's index entry stays: it is what keeps the
/// contact from entering again.
fn prune(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    w: WorkflowId,
    max: u64,
) -> Result<()> {
    let name = executions::finished_counter(w);
    let n = read_counter(store, p, &name)?;
    if n <= max + max / 2 + 100 {
        return Ok(());
    }
    let keep_index = !load(store, p, w)?.is_some_and(|w| w.allow_reentry);
    let mut over = n.saturating_sub(max);
    let mut dropped = 0u64;
    for (k, old) in all_executions(store, p, w)? {
        if over == 0 {
            break;
        }
        if old.status.is_final() {
            if !keep_index {
                batch.delete(k);
            }
            batch.delete(keys::execution(p, old.id));
            over -= 1;
            dropped += 1;
        }
    }
    batch.put(keys::counter(p, &name), codec::encode_u64(n - dropped));
    Ok(())
}

/// How a step ended, as the executor tells it.
pub struct StepEnd {
    pub step: String,
    pub entry: HistoryEntry,
    /// Where it goes on: `Ok(Some(step))`, `Ok(None)` to complete, or `Err(status)` to
    /// end there (EXITED, FAILED).
    pub next: std::result::Result<Option<String>, ExecStatus>,
}

/// The limits of an execution's bookkeeping.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_history: usize,
    pub max_finished: u64,
}

/// A step is done: its history entry, then on to the next step or the end. Answers
/// the execution as it is now, or None when it was no longer at that step.
pub fn step_done(
    ctx: &WriteCtx,
    x: ExecutionId,
    end: StepEnd,
    bounds: Bounds,
) -> Result<Option<Execution>> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now.millis());
    let Some(mut e) = running_at(store, p, x, &end.step)? else {
        return Ok(None);
    };
    let mut batch = Batch::new();
    match end.next {
        Ok(next) => executions::go_on(store, ctx.metrics, &mut batch, p, &mut e, end.entry, next)?,
        Err(status) => {
            e.history.push(end.entry);
            executions::end(store, ctx.metrics, &mut batch, p, &mut e, status, now)?;
        }
    }
    trim(&mut e, bounds.max_history);
    executions::put(&mut batch, p, &e)?;
    if e.status.is_final() {
        prune(store, &mut batch, p, e.workflow_id, bounds.max_finished)?;
    }
    store.apply(batch)?;
    Ok(Some(e))
}

/// UPDATE_CONTACT: the contact changes (its segment entries and exits and any events
/// follow, as with every contact write), then the step is done.
pub fn update_contact(
    ctx: &WriteCtx,
    counts: &mut ProjectCounts,
    x: ExecutionId,
    end: StepEnd,
    data: DataPatch,
    subscribed: Option<bool>,
    bounds: Bounds,
) -> Result<Option<Execution>> {
    let Some(e) = running_at(ctx.store, ctx.project, x, &end.step)? else {
        return Ok(None);
    };
    let patch = PatchContact {
        id: e.contact_id,
        subscribed,
        data,
        reason: Some("workflow".into()),
        campaign: None,
    };
    let mut end = end;
    if let Err(err) = contacts::patch(ctx, counts, patch) {
        if matches!(
            err,
            Error::Storage(_) | Error::Internal(_) | Error::Busy { .. } | Error::NotOwner { .. }
        ) {
            return Err(err);
        }
        end.entry.status = "FAILED".into();
        end.entry.error = Some(err.to_string());
        end.next = Err(ExecStatus::Failed);
    }
    step_done(ctx, x, end, bounds)
}

/// DELAY and WAIT_FOR_EVENT: the execution waits (its timer, and for an event its
/// entry in the waiting index), its timer armed once this write is durable.
pub fn wait(ctx: &WriteCtx, x: ExecutionId, step: &str, wait: Wait) -> Result<()> {
    let (store, p) = (ctx.store, ctx.project);
    let Some(mut e) = running_at(store, p, x, step)? else {
        return Ok(());
    };
    let mut batch = Batch::new();
    let timer = executions::timer(p, x, wait.due);
    batch.put(timer.key(), Vec::new());
    if let Some(event) = &wait.event {
        batch.put(keys::waiting(p, event, e.contact_id, x), Vec::new());
    }
    batch.delete(keys::ready(p, x));
    e.status = ExecStatus::Waiting;
    e.wait = Some(wait);
    executions::put(&mut batch, p, &e)?;
    store.apply(batch)?;
    ctx.wakeups.arm_after_write(timer);
    Ok(())
}

/// A waiting execution's timer fell due: a DELAY is over, or a wait timed out (then
/// it goes to `timeoutNext`). Answers whether it moved on.
pub fn timer_fired(ctx: &WriteCtx, t: Timer, bounds: Bounds) -> Result<bool> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now.millis());
    let mut batch = Batch::new();
    batch.delete(t.key());
    let x: ExecutionId = keys::id_after(&t.target, b"")
        .ok_or_else(|| Error::Internal("a workflow timer without an execution id".into()))?;
    let moved = match executions::load(store, p, x)? {
        Some(mut e)
            if e.status == ExecStatus::Waiting && e.wait.as_ref().map(|w| w.due) == Some(t.due) =>
        {
            let step = e.current.clone().unwrap_or_default();
            let w = e.wait.clone().unwrap_or(Wait {
                due: t.due,
                event: None,
                next: None,
                timeout_next: None,
            });
            let (kind, status, next) = match &w.event {
                Some(_) => ("WAIT_FOR_EVENT", "TIMED_OUT", w.timeout_next.clone()),
                None => ("DELAY", "COMPLETED", w.next.clone()),
            };
            let entry = executions::entry(&step, kind, status, now);
            executions::go_on(store, ctx.metrics, &mut batch, p, &mut e, entry, next)?;
            trim(&mut e, bounds.max_history);
            executions::put(&mut batch, p, &e)?;
            if e.status.is_final() {
                prune(store, &mut batch, p, e.workflow_id, bounds.max_finished)?;
            }
            true
        }
        _ => false,
    };
    store.apply(batch)?;
    Ok(moved)
}
