//! Failed admin authentication is throttled per client address: after
//! `FAILURES_PER_MINUTE` wrong tokens, that address gets 429 for every admin request,
//! right token or not, until its budget is back. Answering a right token during the
//! block would let a guesser go on guessing; blocking only the guesser's address keeps
//! the operator (usually on loopback or another host) in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Wrong tokens an address may send per minute (all at once, then one per 12 s).
const FAILURES_PER_MINUTE: u32 = 5;

/// Addresses remembered as blocked at most; past this the oldest blocks are dropped first.
const BLOCKED_MAX: usize = 10_000;

pub struct AdminGuard {
    failures: DefaultKeyedRateLimiter<IpAddr>,
    blocked: Mutex<HashMap<IpAddr, Instant>>,
}

impl Default for AdminGuard {
    fn default() -> Self {
        let per_minute = NonZeroU32::new(FAILURES_PER_MINUTE).expect("non-zero");
        AdminGuard {
            failures: RateLimiter::keyed(Quota::per_minute(per_minute)),
            blocked: Mutex::new(HashMap::new()),
        }
    }
}

impl AdminGuard {
    /// Seconds the address must still wait, if it is blocked.
    pub fn blocked_for(&self, ip: IpAddr) -> Option<u64> {
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        let until = *blocked.get(&ip)?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(left.as_secs().max(1))
    }

    /// Counts a wrong token; answers the seconds to wait once the address is over budget.
    pub fn failed(&self, ip: IpAddr) -> Option<u64> {
        let not_until = self.failures.check_key(&ip).err()?;
        let wait = not_until
            .wait_time_from(DefaultClock::default().now())
            .max(Duration::from_secs(1));
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        blocked.retain(|_, until| *until > now);
        if blocked.len() >= BLOCKED_MAX {
            blocked.clear();
        }
        blocked.insert(ip, now + wait);
        self.failures.retain_recent();
        Some(wait.as_secs().max(1))
    }
}
