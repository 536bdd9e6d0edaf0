//! What the event path needs to start and wake workflow executions: the re-entry cap,
//! the scheduler's timers and the executors' wake-up. The Registry carries one, and
//! every writer reaches it through the write context, so two engines in one process
//! (two tests, two `Application`s) each keep their own.

use std::sync::{Arc, Mutex};

use crate::model::{ExecutionId, ProjectId};
use crate::scheduler::Timers;

/// Executions of one workflow one contact may start within a day (re-entry) when the
/// configuration says nothing (`workflows.max_entries_per_day`).
pub const MAX_ENTRIES_PER_DAY: u32 = 100;

#[derive(Clone)]
pub struct Starts {
    max_entries_per_day: u32,
    timers: Arc<Timers>,
    ready: Arc<Ready>,
}

impl Starts {
    /// A cap of 0 would shut re-entry workflows entirely; at least one entry a day.
    pub fn new(max_entries_per_day: u32) -> Self {
        Starts {
            max_entries_per_day: max_entries_per_day.max(1),
            timers: Arc::default(),
            ready: Arc::default(),
        }
    }

    pub fn max_entries_per_day(&self) -> u32 {
        self.max_entries_per_day
    }

    /// Durable timers in memory (see `scheduler`); executions that begin waiting arm
    /// theirs here.
    pub fn timers(&self) -> &Arc<Timers> {
        &self.timers
    }

    pub fn ready(&self) -> &Ready {
        &self.ready
    }
}

impl Default for Starts {
    fn default() -> Self {
        Starts::new(MAX_ENTRIES_PER_DAY)
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
