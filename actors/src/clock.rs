//! Time is injected: everything that stamps or waits reads a `Clock`, so tests can
//! fake it and the scheduler can be sped up without sleeping for real.

use chrono::{DateTime, Utc};

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The system's time moved forward by an offset that the operator can add to while the
/// process runs (`clock.adjustable`, for tests): a retry due in an hour, or a three-day
/// delay, falls due at once when the clock is moved past it. Time never moves back.
#[derive(Debug, Default)]
pub struct AdjustableClock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl AdjustableClock {
    /// Moves the clock `ms` milliseconds forward and answers the new time.
    pub fn advance(&self, ms: i64) -> DateTime<Utc> {
        self.offset_ms
            .fetch_add(ms.max(0), std::sync::atomic::Ordering::SeqCst);
        self.now()
    }
}

impl Clock for AdjustableClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = self.offset_ms.load(std::sync::atomic::Ordering::SeqCst);
        Utc::now() + chrono::Duration::milliseconds(offset)
    }
}
