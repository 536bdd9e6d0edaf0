//! What events do to workflows, in the batch that records them: an event wakes the
//! executions of its contact waiting for it (WAIT_FOR_EVENT), and starts executions of
//! the enabled workflows it triggers (within their re-entry rules). Both are written
//! durably with the event, so the answer to `/v1/track` does not wait for a workflow
//! and a crash loses no trigger; the executors take it from there.
//!
//! The cost on the event path, when no workflow cares: one point read of the trigger
//! index and one empty range read per event.

use std::collections::{HashMap, HashSet};

use super::executions::{self, Trigger, Wakeups};
use crate::error::Result;
use crate::model::{ContactId, Event, ExecStatus, ExecutionId, ProjectId, WorkflowId};
use crate::project::hooks::EventsCtx;
use crate::store::{keys, Batch, Store};

pub fn on_events(ctx: &EventsCtx, batch: &mut Batch, events: &[Event]) -> Result<()> {
    let (store, wakeups, p): (&dyn Store, &Wakeups, ProjectId) =
        (ctx.store, ctx.wakeups, ctx.project);
    let mut triggers: HashMap<&str, Vec<Trigger>> = HashMap::new();
    let mut started: HashSet<(WorkflowId, ContactId)> = HashSet::new();
    let mut woken: HashSet<ExecutionId> = HashSet::new();
    let mut ready = Vec::new();
    for ev in events {
        let now = ev.created_at.millis();
        let prefix = keys::waiting_for(p, &ev.name, ev.contact_id);
        for kv in store.scan(&prefix, None, false) {
            let (key, _) = kv?;
            let Some(x) = keys::id_after::<ExecutionId>(&key, &prefix) else {
                continue;
            };
            if !woken.insert(x) {
                continue;
            }
            let Some(mut e) = executions::load(store, p, x)? else {
                batch.delete(key);
                continue;
            };
            let waits_for_this = e.status == ExecStatus::Waiting
                && e.wait.as_ref().and_then(|w| w.event.as_deref()) == Some(ev.name.as_str());
            if !waits_for_this {
                batch.delete(key);
                continue;
            }
            let step = e.current.clone().unwrap_or_default();
            let next = e.wait.as_ref().and_then(|w| w.next.clone());
            let entry = executions::entry(&step, "WAIT_FOR_EVENT", "COMPLETED", now);
            executions::go_on(store, wakeups.metrics(), batch, p, &mut e, entry, next)?;
            if e.status == ExecStatus::Running {
                ready.push((p, e.id));
            }
        }
        let list = match triggers.get(ev.name.as_str()) {
            Some(list) => list,
            None => {
                let list = executions::triggers(store, p, &ev.name)?;
                triggers.entry(ev.name.as_str()).or_insert(list)
            }
        };
        for t in list {
            if started.contains(&(t.workflow, ev.contact_id))
                || !executions::may_enter(store, wakeups, p, t, ev.contact_id, now)?
            {
                continue;
            }
            started.insert((t.workflow, ev.contact_id));
            let e = executions::start(store, wakeups, batch, p, t, ev.contact_id, now)?;
            if e.status == ExecStatus::Running {
                ready.push((p, e.id));
            }
        }
    }
    wakeups.ready().hint(&ready);
    Ok(())
}
