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
    /// The furthest the clock may be moved ahead of the system's: a century.
    pub const MAX_OFFSET_MS: i64 = 100 * 366 * 24 * 3_600_000;

    /// Moves the clock `ms` milliseconds forward (in all, at most `MAX_OFFSET_MS` ahead
    /// of the system's time) and answers the new time.
    pub fn advance(&self, ms: i64) -> DateTime<Utc> {
        let _ = self.offset_ms.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |at| Some(at.saturating_add(ms.max(0)).min(Self::MAX_OFFSET_MS)),
        );
        self.now()
    }
}

impl Clock for AdjustableClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = self.offset_ms.load(std::sync::atomic::Ordering::SeqCst);
        Utc::now() + chrono::Duration::milliseconds(offset)
    }
}
