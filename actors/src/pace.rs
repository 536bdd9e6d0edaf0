//! Per-project rates whose state can move with the project: a GCRA (the algorithm of
//! governor, which paced sends and the API budget before) keyed by project, with each
//! project's theoretical arrival time kept as wall-clock milliseconds. governor keeps
//! that time inside its own clock and cannot hand it over; here a node that gives a
//! project up writes it to the store (`Registry::release`), and the next owner starts
//! from it (`Registry::acquire`), so a lease move neither doubles a project's sending
//! rate nor refills its API budget. Wall clocks of two nodes differ by their drift (NTP:
//! milliseconds), which is what the handed-over time can be off by.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::ProjectId;

/// One rate: a request every `period`, up to `burst` at once.
pub struct Pace {
    period_ms: f64,
    /// How far past now the next allowed time may run: (burst - 1) periods.
    tolerance_ms: f64,
    /// Each project's theoretical arrival time: when it is next allowed a request with
    /// its whole burst used (ms since the epoch).
    tat: Mutex<HashMap<ProjectId, f64>>,
}

/// What a request found: allowed (and what is left), or when to come back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    Allowed {
        /// Requests still allowed at once after this one.
        remaining: u32,
        /// Until the whole burst is back.
        full_in: Duration,
    },
    Wait(Duration),
}

/// Past this many projects, those whose state is spent (back to a full burst) are
/// dropped: the map holds the projects active lately, not every one ever seen.
const SWEEP_AT: usize = 10_000;

pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

impl Pace {
    /// A request every `period`, `burst` (at least 1) at once.
    pub fn new(period: Duration, burst: u32) -> Self {
        let period_ms = period.as_secs_f64() * 1000.0;
        Pace {
            period_ms,
            tolerance_ms: period_ms * f64::from(burst.max(1) - 1),
            tat: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request of `p`'s at `now_ms` (`now_ms()` but in tests).
    pub fn check_at(&self, p: ProjectId, now: f64) -> Verdict {
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        if tat.len() >= SWEEP_AT {
            tat.retain(|_, t| *t > now);
        }
        let at = tat.get(&p).copied().unwrap_or(now).max(now);
        if at - now > self.tolerance_ms {
            return Verdict::Wait(ms(at - now - self.tolerance_ms));
        }
        let next = at + self.period_ms;
        tat.insert(p, next);
        let room = self.tolerance_ms - (next - now);
        Verdict::Allowed {
            remaining: if room < 0.0 {
                0
            } else {
                (room / self.period_ms).floor() as u32 + 1
            },
            full_in: ms(next - now),
        }
    }

    pub fn check(&self, p: ProjectId) -> Verdict {
        self.check_at(p, now_ms())
    }

    /// Waits for `p`'s turn and takes it.
    pub async fn until_ready(&self, p: ProjectId) {
        while let Verdict::Wait(wait) = self.check(p) {
            tokio::time::sleep(wait).await;
        }
    }

    /// `p`'s state to hand over: its theoretical arrival time, when later than now.
    pub fn export(&self, p: ProjectId) -> Option<i64> {
        let tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        tat.get(&p)
            .copied()
            .filter(|t| *t > now_ms())
            .map(|t| t.ceil() as i64)
    }

    /// Starts `p` from a handed-over time (never earlier than its own).
    pub fn seed(&self, p: ProjectId, tat_ms: i64) {
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        let t = tat.entry(p).or_insert(0.0);
        *t = t.max(tat_ms as f64);
    }

    pub fn forget(&self, p: ProjectId) {
        self.tat
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&p);
    }
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_spent_then_refills_one_period_at_a_time() {
        let pace = Pace::new(Duration::from_millis(100), 3);
        let p = ProjectId::new();
        let remaining: Vec<Verdict> = (0..4).map(|_| pace.check_at(p, 1_000.0)).collect();
        assert!(matches!(
            remaining[0],
            Verdict::Allowed { remaining: 2, .. }
        ));
        assert!(matches!(
            remaining[1],
            Verdict::Allowed { remaining: 1, .. }
        ));
        assert!(matches!(
            remaining[2],
            Verdict::Allowed { remaining: 0, .. }
        ));
        assert_eq!(remaining[3], Verdict::Wait(Duration::from_millis(100)));
        assert!(matches!(
            pace.check_at(p, 1_100.0),
            Verdict::Allowed { remaining: 0, .. }
        ));
    }

    #[test]
    fn a_handed_over_time_carries_the_spent_budget_to_another_pace() {
        let old = Pace::new(Duration::from_millis(100), 1);
        let p = ProjectId::new();
        let now = now_ms();
        assert!(matches!(old.check_at(p, now), Verdict::Allowed { .. }));
        let handed = old.export(p).expect("a time in the future");
        let new = Pace::new(Duration::from_millis(100), 1);
        new.seed(p, handed);
        assert!(
            matches!(new.check_at(p, now + 50.0), Verdict::Wait(_)),
            "the new owner waits out the old owner's period"
        );
        assert!(matches!(
            new.check_at(p, now + 101.0),
            Verdict::Allowed { .. }
        ));
    }
}
