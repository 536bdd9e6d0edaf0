//! What a write wakes once it is durable: the scheduler's timers, the workflow
//! executors and the webhook dispatcher, with the re-entry cap the event path needs to
//! start executions and the engine's counters. (It was `Starts`, which said only the
//! first of these.) The
//! Registry carries one, and every writer reaches it through the write context, so two
//! engines in one process (two tests, two `Application`s) each keep their own.
//!
//! A write that makes a timer notes it here (`arm_after_write`) rather than arming it:
//! the project's actor arms what its write noted once that write is durable, so the
//! Scheduler never fires a timer whose key a crash could still take back. Events an
//! endpoint wants are noted the same way (`webhooks_after_write`). Each actor
//! has its own note list (`for_actor`), so one actor's flush never arms another's.

use std::sync::{Arc, Mutex};

use crate::metrics::Metrics;
use crate::model::{ExecutionId, ProjectId};
use crate::scheduler::{Timer, Timers};

/// Executions of one workflow one contact may start within a day (re-entry) when the
/// configuration says nothing (`workflows.max_entries_per_day`).
pub const MAX_ENTRIES_PER_DAY: u32 = 100;

#[derive(Clone)]
pub struct Wakeups {
    max_entries_per_day: u32,
    timers: Arc<Timers>,
    ready: Arc<Ready>,
    webhooks: Arc<WebhookWake>,
    metrics: Arc<Metrics>,
    /// What writes not yet durable wake, woken by the actor that made them.
    noted: Arc<Mutex<Noted>>,
}

/// What an actor's writes noted: their timers, and whether they wrote events a webhook
/// endpoint wants. Both wake only once the writes are durable: the scheduler must not
/// fire a timer a crash could take back, and the webhook dispatcher reads durable
/// events only (woken earlier, its round could find nothing new and leave the events
/// to the next sweep, seconds later).
#[derive(Default)]
pub struct Noted {
    pub timers: Vec<Timer>,
    pub webhooks: Option<ProjectId>,
}

impl Noted {
    pub fn is_empty(&self) -> bool {
        self.timers.is_empty() && self.webhooks.is_none()
    }
}

impl Wakeups {
    /// A cap of 0 would shut re-entry workflows entirely; at least one entry a day.
    pub fn new(max_entries_per_day: u32, metrics: Arc<Metrics>) -> Self {
        Wakeups {
            max_entries_per_day: max_entries_per_day.max(1),
            timers: Arc::default(),
            ready: Arc::default(),
            webhooks: Arc::default(),
            metrics,
            noted: Arc::default(),
        }
    }

    /// Timers that fire only for the projects `ownership` says (a cluster node).
    pub fn with_ownership(mut self, ownership: Arc<crate::cluster::ownership::Ownership>) -> Self {
        self.timers = Arc::new(Timers::owned_by(ownership));
        self
    }

    /// The same engine's starts with a note list of its own, for one project actor.
    pub fn for_actor(&self) -> Wakeups {
        Wakeups {
            noted: Arc::default(),
            ..self.clone()
        }
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Notes a timer whose key is in the batch being written; armed once it is durable.
    pub fn arm_after_write(&self, timer: Timer) {
        self.noted().timers.push(timer);
    }

    /// Notes that the batch being written holds events an endpoint of `p` wants; the
    /// dispatcher is told once it is durable.
    pub fn webhooks_after_write(&self, p: ProjectId) {
        self.noted().webhooks = Some(p);
    }

    /// Takes what the writes so far noted (the actor, right after a write).
    pub fn take_noted(&self) -> Noted {
        std::mem::take(&mut *self.noted())
    }

    /// Wakes what a durable write noted.
    pub fn wake(&self, noted: Noted) {
        for t in noted.timers {
            self.timers.arm(t);
        }
        if let Some(p) = noted.webhooks {
            self.webhooks.note(p);
        }
    }

    fn noted(&self) -> std::sync::MutexGuard<'_, Noted> {
        self.noted.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn max_entries_per_day(&self) -> u32 {
        self.max_entries_per_day
    }

    /// Durable timers in memory (see `scheduler`).
    pub fn timers(&self) -> &Arc<Timers> {
        &self.timers
    }

    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// The webhook deliverer's wake-up (see `WebhookWake`).
    pub fn webhooks(&self) -> &WebhookWake {
        &self.webhooks
    }
}

/// The webhook deliverer's wake-up: the projects that wrote events an endpoint of
/// theirs wants since it last looked (it reads the events themselves from the log),
/// and how many deliveries it last saw waiting (for /metrics).
#[derive(Default)]
pub struct WebhookWake {
    signal: tokio::sync::Notify,
    projects: Mutex<std::collections::HashSet<ProjectId>>,
    waiting: std::sync::atomic::AtomicU64,
}

impl WebhookWake {
    pub fn note(&self, p: ProjectId) {
        let new = self
            .projects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p);
        if new {
            self.signal.notify_one();
        }
    }

    pub fn take(&self) -> Vec<ProjectId> {
        let mut held = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        held.drain().collect()
    }

    /// Resolves once `note` is called (or was, since the last wait).
    pub async fn notified(&self) {
        self.signal.notified().await
    }

    pub fn set_waiting(&self, n: u64) {
        self.waiting.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Events an endpoint wants that had no delivery yet at the deliverer's last look.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Default for Wakeups {
    fn default() -> Self {
        Wakeups::new(MAX_ENTRIES_PER_DAY, Arc::default())
    }
}

/// The executors' wake-up. The executions just put in the ready queue (not yet
/// durable, maybe) are noted, so that the executors look at these rather than walk the
/// whole queue after every event.
#[derive(Default)]
pub struct Ready {
    signal: tokio::sync::Notify,
    hints: Mutex<Vec<(ProjectId, ExecutionId)>>,
}

impl Ready {
    /// Notes executions put in the ready queue, and wakes the executors.
    pub fn hint(&self, ready: &[(ProjectId, ExecutionId)]) {
        if ready.is_empty() {
            return;
        }
        self.hints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(ready);
        self.signal.notify_one();
    }

    /// Takes the noted executions.
    pub fn take(&self) -> Vec<(ProjectId, ExecutionId)> {
        std::mem::take(&mut *self.hints.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Resolves once `hint` is called (or was, since the last wait).
    pub async fn notified(&self) {
        self.signal.notified().await
    }
}
