//! Failed authentication attempts counted where every node sees them: the guard of the
//! admin API and the dashboard's sign-in (`api::guard` in the binary) asks these when
//! the store is shared by several nodes, so a guesser gets one budget, not one per node.
//! The PostgreSQL store implements it (`store::postgres::guard`); sled has one node, and
//! the guard counts in memory there.
//!
//! The budget is a leaky bucket per client: each failure adds one, one leaks out every
//! `refill_seconds`, and the failure that takes the level past `burst` blocks the client
//! for `refill_seconds`. Every time is the database's `now()`.

use crate::cluster::leases::LeaseFuture;

pub trait GuardCounts: Send + Sync + 'static {
    /// Seconds `client` must still wait, when it is blocked.
    fn blocked_for(&self, client: &str) -> LeaseFuture<Option<u64>>;

    /// Counts a failure of `client`; the seconds it must now wait, when this failure
    /// took it over its budget.
    fn failed(&self, client: &str, burst: u32, refill_seconds: u64) -> LeaseFuture<Option<u64>>;
}
