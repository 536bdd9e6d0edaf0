//! One guard for every door a secret is guessed at: the admin API (`/admin`, also when
//! a request names a project and would be routed to its owner) and the dashboard's
//! sign-in (a project's secret key or the admin token). After `FAILURES_PER_MINUTE`
//! wrong secrets an address gets 429 at every one of them, right secret or not, until
//! its budget is back. Answering a right secret during the block would let a guesser go
//! on guessing; blocking only the guesser's address keeps the operator (usually on
//! loopback or another host) in.
//!
//! A request is charged before anything depends on its secret: `blocked_for` first,
//! then the comparison, then `failed` for a wrong one. On a cluster the counts live in
//! the database (`GuardCounts`), so every node sees the same budget; when the database
//! cannot be asked, the node counts in its own memory meanwhile. The address counted is
//! the client's (`client_addr`: `server.trusted_proxies` decide whose
//! `X-Forwarded-For` names it), IPv6 by its /64 network.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use mailroom_actors::engine::cluster::GuardCounts;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Wrong secrets an address may send per minute (all at once, then one per 12 s).
const FAILURES_PER_MINUTE: u32 = 5;

/// Addresses remembered as blocked at most; past this the oldest blocks are dropped first.
const BLOCKED_MAX: usize = 10_000;

pub struct Guard {
    local: LocalCounts,
    shared: Option<Arc<dyn GuardCounts>>,
}

/// A request whose wrong secret was counted already (by the forwarding middleware, which
/// compares an admin token to route it): the handler answers from this instead of
/// counting it again. The seconds to wait, when the failure blocked the client.
#[derive(Debug, Clone, Copy)]
pub struct Charged(pub Option<u64>);

impl Guard {
    /// A guard that counts in `shared` (a cluster's database) when given, else in this
    /// process's memory.
    pub fn new(shared: Option<Arc<dyn GuardCounts>>) -> Self {
        Guard {
            local: LocalCounts::default(),
            shared,
        }
    }

    /// Seconds the address must still wait, if it is blocked. A block this node knows
    /// of is answered from memory: a blocked client's requests cost the database nothing.
    pub async fn blocked_for(&self, ip: IpAddr) -> Option<u64> {
        let ip = client(ip);
        if let Some(left) = self.local.blocked_for(ip) {
            return Some(left);
        }
        if let Some(shared) = &self.shared {
            match shared.blocked_for(&ip.to_string()).await {
                Ok(left) => {
                    if let Some(secs) = left {
                        self.local.remember(ip, secs);
                    }
                    return left;
                }
                Err(e) => tracing::warn!(error = %e, "reading the shared guard; counting here"),
            }
        }
        None
    }

    /// Counts a wrong secret; answers the seconds to wait once the address is over
    /// budget.
    pub async fn failed(&self, ip: IpAddr) -> Option<u64> {
        let ip = client(ip);
        if let Some(shared) = &self.shared {
            let refill = u64::from(60 / FAILURES_PER_MINUTE);
            match shared
                .failed(&ip.to_string(), FAILURES_PER_MINUTE, refill)
                .await
            {
                Ok(wait) => {
                    if let Some(secs) = wait {
                        self.local.remember(ip, secs);
                    }
                    return wait;
                }
                Err(e) => tracing::warn!(error = %e, "counting in the shared guard; counting here"),
            }
        }
        self.local.failed(ip)
    }
}

/// The counts of one process: governor's keyed limiter, and the blocks it gave.
struct LocalCounts {
    failures: DefaultKeyedRateLimiter<IpAddr>,
    blocked: Mutex<HashMap<IpAddr, Instant>>,
}

impl Default for LocalCounts {
    fn default() -> Self {
        let per_minute = NonZeroU32::new(FAILURES_PER_MINUTE).expect("non-zero");
        LocalCounts {
            failures: RateLimiter::keyed(Quota::per_minute(per_minute)),
            blocked: Mutex::new(HashMap::new()),
        }
    }
}

impl LocalCounts {
    /// A block the shared counts gave, kept here until it ends.
    fn remember(&self, ip: IpAddr, secs: u64) {
        self.block(ip, Duration::from_secs(secs));
    }

    /// Blocks `ip` for `wait`, within `BLOCKED_MAX` addresses.
    fn block(&self, ip: IpAddr, wait: Duration) {
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
    }

    fn blocked_for(&self, ip: IpAddr) -> Option<u64> {
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        let until = *blocked.get(&ip)?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(left.as_secs().max(1))
    }

    fn failed(&self, ip: IpAddr) -> Option<u64> {
        let not_until = self.failures.check_key(&ip).err()?;
        let wait = not_until
            .wait_time_from(DefaultClock::default().now())
            .max(Duration::from_secs(1));
        self.block(ip, wait);
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

    #[actix_web::test]
    async fn the_sixth_failure_in_a_minute_blocks_the_address_and_no_other() {
        let guard = Guard::new(None);
        let (eve, ada) = ("192.0.2.66".parse().unwrap(), "192.0.2.1".parse().unwrap());
        for _ in 0..FAILURES_PER_MINUTE {
            assert_eq!(guard.failed(eve).await, None);
        }
        assert!(guard.failed(eve).await.is_some());
        assert!(guard.blocked_for(eve).await.is_some());
        assert_eq!(guard.blocked_for(ada).await, None);
    }
}
