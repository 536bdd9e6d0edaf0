//! Faults the tests inject into the engine, compiled into debug builds only (the ones
//! tests run; a release build has none of this). `MAILROOM_FAULT_PANIC_ONCE` names the
//! points, comma-separated, where the engine panics once, to show that the supervisor
//! restarts what panicked and that the work still completes exactly once.

use std::sync::atomic::{AtomicBool, Ordering};

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// A workflow executor, after a SEND_EMAIL step queued its email and before the
    /// step's end is written.
    WorkflowStep,
    /// A campaign runner, after a batch was queued durably and before the next.
    CampaignBatch,
}

impl Point {
    const ALL: [Point; 2] = [Point::WorkflowStep, Point::CampaignBatch];

    fn as_str(self) -> &'static str {
        match self {
            Point::WorkflowStep => "workflow_step",
            Point::CampaignBatch => "campaign_batch",
        }
    }
}

/// The armed faults of one engine, each fired at most once.
#[derive(Default)]
pub struct Faults {
    armed: [AtomicBool; 2],
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

    /// Panics the first time `point` is reached, when it is armed.
    pub fn hit(&self, point: Point) {
        if cfg!(debug_assertions) && self.armed[point as usize].swap(false, Ordering::Relaxed) {
            panic!("injected fault at {}", point.as_str());
        }
    }
}
