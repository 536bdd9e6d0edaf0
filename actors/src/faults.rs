//! Faults the tests inject into the engine, compiled into debug builds only (the ones
//! tests run; a release build has none of this). `MAILROOM_FAULT_PANIC_ONCE` names the
//! points, comma-separated, where the engine panics once, to show that the supervisor
//! restarts what panicked and that the work still completes exactly once; engine tests
//! arm them with `Faults::arm`.

use std::sync::atomic::{AtomicBool, Ordering};

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// A workflow executor, after a SEND_EMAIL step queued its email and before the
    /// step's end is written.
    WorkflowStep,
    /// A campaign runner, after a batch was queued durably and before the next.
    CampaignBatch,
    /// The dispatcher's round, as it is about to hand a due email to a mailer (the
    /// email is not yet in flight).
    DispatcherRound,
    /// A mailer, as it takes an email, on its own thread (before the message is built
    /// and long before the SMTP transaction).
    MailerSend,
    /// A mailer's SMTP transaction, just begun (the relay may have the email): the
    /// email must fail rather than go again.
    MailerTransaction,
    /// The Scheduler, once timers that fell due were taken from memory and before
    /// they are fired (they are lost from memory, not from the store).
    SchedulerFire,
    /// A project actor, as a write begins (before it changes anything).
    ProjectWrite,
}

impl Point {
    const ALL: [Point; 7] = [
        Point::WorkflowStep,
        Point::CampaignBatch,
        Point::DispatcherRound,
        Point::MailerSend,
        Point::MailerTransaction,
        Point::SchedulerFire,
        Point::ProjectWrite,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Point::WorkflowStep => "workflow_step",
            Point::CampaignBatch => "campaign_batch",
            Point::DispatcherRound => "dispatcher_round",
            Point::MailerSend => "mailer_send",
            Point::MailerTransaction => "mailer_transaction",
            Point::SchedulerFire => "scheduler_fire",
            Point::ProjectWrite => "project_write",
        }
    }
}

/// The armed faults of one engine, each fired at most once.
#[derive(Default)]
pub struct Faults {
    armed: [AtomicBool; Point::ALL.len()],
}

impl Faults {
    /// The faults `MAILROOM_FAULT_PANIC_ONCE` names (none in a release build).
    pub fn from_env() -> Faults {
        let faults = Faults::default();
        if cfg!(debug_assertions) {
            let named = std::env::var("MAILROOM_FAULT_PANIC_ONCE").unwrap_or_default();
            for p in Point::ALL {
                if named.split(',').any(|n| n.trim() == p.as_str()) {
                    faults.armed[p as usize].store(true, Ordering::Relaxed);
                }
            }
        }
        faults
    }

    #[cfg(test)]
    /// Arms `point` now (debug builds only): engine tests, which cannot give each
    /// engine an environment of its own.
    pub fn arm(&self, point: Point) {
        if cfg!(debug_assertions) {
            self.armed[point as usize].store(true, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    /// Whether `point` is armed and not yet reached (a test sees that its fault fired).
    pub fn is_armed(&self, point: Point) -> bool {
        self.armed[point as usize].load(Ordering::Relaxed)
    }

    /// Panics the first time `point` is reached, when it is armed.
    pub fn hit(&self, point: Point) {
        if cfg!(debug_assertions) && self.armed[point as usize].swap(false, Ordering::Relaxed) {
            panic!("injected fault at {}", point.as_str());
        }
    }
}
