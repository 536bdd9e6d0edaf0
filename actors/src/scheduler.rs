//! Durable timers, shared by campaigns (a scheduled send) and workflows (a delay, a
//! wait's timeout).
//!
//! A timer is a key in the store (`keys::timer`: due time first, so the store is the
//! due-time index), written in the same batch as the state that waits on it, and an
//! entry in memory (`Timers`), armed once that batch is durable. The Scheduler keeps one
//! sleep, until the earliest due time (or until it is woken: a new timer, or the test
//! clock moved), and hands what fell due to its owner's `Fire`. At start-up it loads
//! every timer of the projects this node owns from the store, so a restart resumes them
//! all, and those that fell due while the server was down fire at once; a node that
//! takes a project later loads that project's timers then (`load_timers`), and one that
//! hands a project over forgets them (`Timers::forget`). A timer of a project this node
//! does not own (any more) is dropped when it falls due, not fired: its owner has it.
//!
//! The owner deletes the timer's key when it acts on it, in the batch of that action, so
//! a timer fires until its work is durable. A timer whose key is gone (a cancelled
//! schedule) is skipped when it falls due.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::{Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Supervised, WrapFuture};
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::cluster::ownership::Ownership;
use crate::error::Result;
use crate::faults::{Faults, Point};
use crate::model::ProjectId;
use crate::store::{keys, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKind {
    /// A campaign scheduled for later; the target is its id.
    Campaign,
    /// A workflow execution waiting (DELAY, WAIT_FOR_EVENT's timeout).
    Workflow,
}

impl TimerKind {
    fn tag(self) -> u8 {
        match self {
            TimerKind::Campaign => 1,
            TimerKind::Workflow => 2,
        }
    }

    fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            1 => Some(TimerKind::Campaign),
            2 => Some(TimerKind::Workflow),
            _ => None,
        }
    }
}

/// One durable timer. Fields in this order, so timers sort by due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timer {
    /// Milliseconds since the epoch, on the injected clock.
    pub due: i64,
    pub kind: TimerKind,
    pub project: ProjectId,
    pub target: [u8; 16],
}

impl Timer {
    pub fn key(&self) -> Vec<u8> {
        keys::timer(self.due, self.kind.tag(), self.project, &self.target)
    }

    pub fn parse(key: &[u8]) -> Option<Self> {
        let (due, tag, project, target) = keys::parse_timer(key)?;
        Some(Timer {
            due,
            kind: TimerKind::from_tag(tag)?,
            project,
            target,
        })
    }
}

/// The timers in memory, shared by whoever arms them and the Scheduler.
pub struct Timers {
    set: Mutex<BTreeSet<Timer>>,
    wake: Notify,
    /// The projects whose timers fire here.
    ownership: Arc<Ownership>,
    /// Failures in a row of each timer whose work failed (or panicked) and is tried
    /// again, for its backoff; a timer leaves it when its work succeeds or it is gone.
    failures: Mutex<HashMap<Timer, u32>>,
}

impl Default for Timers {
    fn default() -> Self {
        Timers::owned_by(Ownership::everything())
    }
}

impl Timers {
    /// Timers that fire only for the projects `ownership` says.
    pub fn owned_by(ownership: Arc<Ownership>) -> Self {
        Timers {
            set: Mutex::default(),
            wake: Notify::new(),
            ownership,
            failures: Mutex::default(),
        }
    }

    /// Drops every timer of `p` from memory (its keys stay: the next owner loads them).
    pub fn forget(&self, p: ProjectId) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t, _| t.project != p);
        self.set().retain(|t| t.project != p);
    }

    fn set(&self) -> std::sync::MutexGuard<'_, BTreeSet<Timer>> {
        self.set.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arms a timer whose key is durable in the store.
    pub fn arm(&self, timer: Timer) {
        let earliest = {
            let mut set = self.set();
            set.insert(timer);
            set.first() == Some(&timer)
        };
        if earliest {
            self.wake.notify_one();
        }
    }

    /// Wakes the Scheduler to look again (the clock was moved).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub fn len(&self) -> usize {
        self.set().len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the timers due at `now`; answers them and the next due time after.
    fn take_due(&self, now: i64) -> (Vec<Timer>, Option<i64>) {
        let mut set = self.set();
        let mut due = Vec::new();
        while let Some(first) = set.first().copied() {
            if first.due > now {
                return (due, Some(first.due));
            }
            set.pop_first();
            due.push(first);
        }
        (due, None)
    }
}

/// What a timer that fell due does. An error leaves its key in place; it is tried
/// again a second later.
pub type Fire = Arc<dyn Fn(Timer) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Timers acted on at once, at most: 10,000 that fall due together go through in
/// waves instead of filling every project's mailbox.
const CONCURRENT_FIRES: usize = 256;

/// Longest sleep between looks, so a lost wake-up costs at most this.
const MAX_SLEEP: Duration = Duration::from_secs(30);

pub struct Scheduler {
    timers: Arc<Timers>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    fire: Fire,
    faults: Arc<Faults>,
}

impl Scheduler {
    pub fn new(
        timers: Arc<Timers>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        fire: Fire,
    ) -> Self {
        Scheduler {
            timers,
            store,
            clock,
            fire,
            faults: Arc::default(),
        }
    }

    /// The engine's test faults (debug builds only; `Registry::faults`).
    pub fn with_faults(mut self, faults: Arc<Faults>) -> Self {
        self.faults = faults;
        self
    }
}

/// Arms the timers in the store of project `p` (None: of every project this node
/// owns); answers how many. Timer keys sort by due time, not by project, so this walks
/// every timer key the store holds.
pub fn load_timers(store: &dyn Store, timers: &Timers, p: Option<ProjectId>) -> Result<usize> {
    let mut n = 0;
    for kv in store.scan(keys::TIMERS, None, false) {
        let (key, _) = kv?;
        match Timer::parse(&key) {
            Some(t) if p.map_or(timers.ownership.owns(t.project), |p| p == t.project) => {
                timers.set().insert(t);
                n += 1;
            }
            Some(_) => {}
            None => tracing::error!(key = ?key, "a timer key that does not parse"),
        }
    }
    if n > 0 {
        timers.wake();
    }
    Ok(n)
}

impl Actor for Scheduler {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        match load_timers(&*self.store, &self.timers, None) {
            Ok(n) => tracing::info!(timers = n, "scheduler started"),
            Err(e) => tracing::error!(error = %e, "loading timers"),
        }
        let (timers, store, clock, fire) = (
            self.timers.clone(),
            self.store.clone(),
            self.clock.clone(),
            self.fire.clone(),
        );
        let run = run(timers, store, clock, fire, self.faults.clone());
        // A panic ends the loop, not the process: the actor stops and its supervisor
        // starts it again, and `started` arms every timer from the store once more
        // (those the panic took out of memory too).
        ctx.spawn(
            futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run))
                .into_actor(self)
                .map(|ran, _, ctx| {
                    if ran.is_err() {
                        tracing::error!("the scheduler panicked; it restarts from the store");
                        ctx.stop();
                    }
                }),
        );
    }
}

impl Supervised for Scheduler {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!("scheduler restarting; reloading timers from the store");
    }
}

async fn run(
    timers: Arc<Timers>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    fire: Fire,
    faults: Arc<Faults>,
) {
    loop {
        let now = clock.now().timestamp_millis();
        let (due, next) = timers.take_due(now);
        if !due.is_empty() {
            faults.hit(Point::SchedulerFire);
            tracing::debug!(timers = due.len(), "timers fell due");
            let (timers, store, fire) = (timers.clone(), store.clone(), fire.clone());
            actix::spawn(async move {
                futures_util::stream::iter(due)
                    .for_each_concurrent(CONCURRENT_FIRES, |t| fire_one(&timers, &*store, &fire, t))
                    .await;
            });
        }
        let wait = next.map_or(MAX_SLEEP, |at| {
            Duration::from_millis((at - now).max(1) as u64).min(MAX_SLEEP)
        });
        tokio::select! {
            _ = timers.wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn fire_one(timers: &Timers, store: &dyn Store, fire: &Fire, t: Timer) {
    if !timers.ownership.owns(t.project) {
        // Handed over (or the lease ran out): the project's owner fires it.
        return;
    }
    match store.get(&t.key()) {
        Ok(None) => {
            timers.forget_failures(&t);
            return;
        }
        Ok(Some(_)) => {}
        Err(e) => tracing::warn!(error = %e, "reading a timer; firing it anyway"),
    }
    let fired = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(fire(t))).await;
    let failed = match fired {
        Ok(Ok(())) => {
            timers.forget_failures(&t);
            return;
        }
        Ok(Err(e)) => e.to_string(),
        // Its owner's work panicked: contained here like a failure, so that the other
        // timers of its wave still fire.
        Err(_) => "it panicked".to_owned(),
    };
    // Backs off (1 s, 2 s, 4 s, ... up to RETRY_MAX): work that fails every time (a
    // panic restarts and reloads the project's actor) must not do so every second.
    let wait = retry_wait(timers.note_failure(&t));
    tracing::warn!(timer = ?t, error = %failed, ?wait, "a timer's work failed; trying again");
    tokio::time::sleep(wait).await;
    timers.arm(t);
}

/// The longest wait before a failing timer is tried again.
const RETRY_MAX: Duration = Duration::from_secs(300);

/// The wait before the `n`th try again of a failing timer (n from 1).
fn retry_wait(n: u32) -> Duration {
    crate::backoff::doubling(Duration::from_secs(1), n, RETRY_MAX)
}

impl Timers {
    /// Counts a failure of `t`; answers its failures in a row.
    fn note_failure(&self, t: &Timer) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(*t).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// `t` succeeded, or is gone: its failures in a row start again from none.
    fn forget_failures(&self, t: &Timer) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_timer_waits_longer_each_time_up_to_five_minutes() {
        let waits: Vec<u64> = [1, 2, 3, 9, 10, 40]
            .map(|n| retry_wait(n).as_secs())
            .to_vec();
        assert_eq!(waits, [1, 2, 4, 256, 300, 300]);
    }

    #[test]
    fn timer_keys_round_trip_and_sort_by_due_time() {
        let t = Timer {
            due: 1_700_000_000_000,
            kind: TimerKind::Workflow,
            project: ProjectId::new(),
            target: [7; 16],
        };
        assert_eq!(Timer::parse(&t.key()), Some(t));
        let later = Timer {
            due: t.due + 1,
            ..t
        };
        assert!(t.key() < later.key());
    }

    #[test]
    fn a_forgotten_project_s_timers_leave_memory_and_others_stay() {
        let timers = Timers::default();
        let (gone, kept) = (ProjectId::new(), ProjectId::new());
        for (due, project) in [(10, gone), (20, kept), (30, gone)] {
            timers.arm(Timer {
                due,
                kind: TimerKind::Workflow,
                project,
                target: [0; 16],
            });
        }
        timers.forget(gone);
        let (due, _) = timers.take_due(100);
        assert_eq!(due.iter().map(|t| t.project).collect::<Vec<_>>(), [kept]);
    }

    #[test]
    fn only_what_fell_due_is_taken() {
        let timers = Timers::default();
        let p = ProjectId::new();
        for due in [30, 10, 20] {
            timers.arm(Timer {
                due,
                kind: TimerKind::Campaign,
                project: p,
                target: [0; 16],
            });
        }
        let (due, next) = timers.take_due(20);
        assert_eq!(due.iter().map(|t| t.due).collect::<Vec<_>>(), [10, 20]);
        assert_eq!(next, Some(30));
        assert_eq!(timers.len(), 1);
    }
}
