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
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

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
        let ip = client(ip);
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        let until = *blocked.get(&ip)?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(left.as_secs().max(1))
    }

    /// Counts a wrong token; answers the seconds to wait once the address is over budget.
    pub fn failed(&self, ip: IpAddr) -> Option<u64> {
        let ip = client(ip);
        let not_until = self.failures.check_key(&ip).err()?;
        let wait = not_until
            .wait_time_from(DefaultClock::default().now())
            .max(Duration::from_secs(1));
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        blocked.retain(|_, until| *until > now);
        if blocked.len() >= BLOCKED_MAX {
            // Make room by ending the blocks that end soonest, not by lifting them all.
            let mut ends: Vec<Instant> = blocked.values().copied().collect();
            ends.sort_unstable();
            let cut = ends[ends.len() / 10];
            blocked.retain(|_, until| *until > cut);
        }
        blocked.insert(ip, now + wait);
        self.failures.retain_recent();
        Some(wait.as_secs().max(1))
    }
}

/// Whether `given` is the admin token. Both sides are hashed first: `ct_eq` on the raw
/// bytes answers at once when the lengths differ, which would tell a guesser the
/// token's length; on two digests it always compares 32 bytes.
pub fn token_matches(expected: &str, given: &str) -> bool {
    let (a, b) = (Sha256::digest(expected), Sha256::digest(given));
    a.as_slice().ct_eq(b.as_slice()).into()
}

/// The address a client is counted by: IPv4 as it is, IPv6 by its /64 network.
fn client(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_itself_matches_and_another_length_goes_through_the_same_digests() {
        let token = "test-admin-token-0123456789abcdefghijklmnop";
        assert!(token_matches(token, token));
        let shorter = &token[..token.len() - 1];
        let longer = format!("{token}q");
        for wrong in [
            shorter,
            longer.as_str(),
            "",
            "test-admin-token-0123456789abcdefghijklmnoq",
        ] {
            assert!(!token_matches(token, wrong), "{wrong:?}");
        }
    }
}
