//! Per-project rates whose state can move with the project: a GCRA (the algorithm of
//! governor, which paced sends and the API budget before) keyed by project. Each
//! project's theoretical arrival time is kept on the monotonic clock (a wall-clock step
//! must not stall every project) and turned into wall-clock milliseconds only to hand it
//! over: governor keeps that time inside its own clock and cannot export or seed it.
//! A node that gives a project up writes it to the store (`Registry::release`), and the
//! next owner starts from it (`Registry::acquire`), so a lease move neither doubles a
//! project's sending rate nor refills its API budget. Wall clocks of two nodes differ by
//! their drift (NTP: milliseconds), which is what the handed-over time can be off by.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::model::ProjectId;

/// One rate: a request every `period`, up to `burst` at once.
pub struct Pace {
    /// Times below are milliseconds since this instant.
    origin: Instant,
    period_ms: f64,
    /// How far past now the next allowed time may run: (burst - 1) periods.
    tolerance_ms: f64,
    /// Each project's theoretical arrival time: when it is next allowed a request with
    /// its whole burst used (ms since `origin`).
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

/// Wall-clock milliseconds since the epoch.
pub fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

impl Pace {
    /// A request every `period`, `burst` (at least 1) at once.
    pub fn new(period: Duration, burst: u32) -> Self {
        let period_ms = period.as_secs_f64() * 1000.0;
        Pace {
            origin: Instant::now(),
            period_ms,
            tolerance_ms: period_ms * f64::from(burst.max(1) - 1),
            tat: Mutex::new(HashMap::new()),
        }
    }

    /// Now, on this pace's clock.
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * 1000.0
    }

    /// Takes one request of `p`'s at `now` (`self.now()` but in tests).
    fn check_at(&self, p: ProjectId, now: f64) -> Verdict {
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        if tat.len() >= SWEEP_AT {
            tat.retain(|_, t| *t > now);
        }
        let at = tat.get(&p).copied().unwrap_or(now).max(now);
        // A hair of slack: a period that does not divide evenly must not round a
        // request of the burst into a refusal.
        if at - now > self.tolerance_ms + EPSILON_MS {
            return Verdict::Wait(ms(at - now - self.tolerance_ms));
        }
        let next = at + self.period_ms;
        tat.insert(p, next);
        let room = self.tolerance_ms - (next - now);
        Verdict::Allowed {
            remaining: if room < -EPSILON_MS {
                0
            } else {
                (room / self.period_ms + 1e-9).floor() as u32 + 1
            },
            full_in: ms(next - now),
        }
    }

    pub fn check(&self, p: ProjectId) -> Verdict {
        self.check_at(p, self.now())
    }

    /// Waits for `p`'s turn and takes it.
    pub async fn until_ready(&self, p: ProjectId) {
        while let Verdict::Wait(wait) = self.check(p) {
            tokio::time::sleep(wait).await;
        }
    }

    /// `p`'s state to hand over: its theoretical arrival time as wall-clock ms since
    /// the epoch, when later than now.
    pub fn export(&self, p: ProjectId) -> Option<i64> {
        let now = self.now();
        let tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        tat.get(&p)
            .copied()
            .filter(|t| *t > now)
            .map(|t| (wall_ms() + (t - now)).ceil() as i64)
    }

    /// Starts `p` from a handed-over time (wall-clock ms; never earlier than its own).
    pub fn seed(&self, p: ProjectId, tat_wall_ms: i64) {
        let now = self.now();
        // At most a day ahead: a damaged or hostile record cannot stall a project longer.
        let ahead = (tat_wall_ms as f64 - wall_ms()).clamp(0.0, 86_400_000.0);
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        let t = tat.entry(p).or_insert(0.0);
        *t = t.max(now + ahead);
    }

    pub fn forget(&self, p: ProjectId) {
        self.tat
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&p);
    }
}

const EPSILON_MS: f64 = 1e-6;

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
        let old = Pace::new(Duration::from_secs(60), 1);
        let p = ProjectId::new();
        assert!(matches!(old.check(p), Verdict::Allowed { .. }));
        let handed = old.export(p).expect("a time in the future");
        let new = Pace::new(Duration::from_secs(60), 1);
        new.seed(p, handed);
        match new.check(p) {
            Verdict::Wait(w) => assert!(w > Duration::from_secs(58), "{w:?}"),
            allowed => panic!("the new owner must wait out the old owner's period: {allowed:?}"),
        }
        let fresh = Pace::new(Duration::from_secs(60), 1);
        assert!(
            matches!(fresh.check(p), Verdict::Allowed { .. }),
            "without the handover"
        );
    }

    #[test]
    fn a_budget_whose_period_does_not_divide_evenly_allows_its_whole_burst() {
        let pace = Pace::new(Duration::from_secs_f64(60.0 / 7.0), 7);
        let p = ProjectId::new();
        let remaining: Vec<u32> = (0..7)
            .map(|_| match pace.check_at(p, 5_000.0) {
                Verdict::Allowed { remaining, .. } => remaining,
                Verdict::Wait(w) => panic!("refused within the burst: {w:?}"),
            })
            .collect();
        assert_eq!(remaining, [6, 5, 4, 3, 2, 1, 0]);
        assert!(matches!(pace.check_at(p, 5_000.0), Verdict::Wait(_)));
    }

    #[test]
    fn a_record_from_far_ahead_stalls_a_project_a_day_at_most() {
        let pace = Pace::new(Duration::from_millis(10), 1);
        let p = ProjectId::new();
        pace.seed(p, i64::MAX);
        match pace.check(p) {
            Verdict::Wait(w) => assert!(w <= Duration::from_secs(86_400), "{w:?}"),
            v => panic!("{v:?}"),
        }
    }
}
