//! Failed authentication attempts on PostgreSQL (`cluster::guard::GuardCounts`): one row
//! per client in `mailroom_guard` (schema migration 4), changed by one statement per
//! failure, on the database's clock. Rows idle for an hour are swept by the failures
//! that come after them.

use super::db::failed;
use super::leases::PgLeases;
use crate::cluster::guard::GuardCounts;
use crate::cluster::leases::LeaseFuture;

/// Seconds left until `until` (a database time), rounded up, at least 1.
fn wait_secs(left: f64) -> u64 {
    (left.ceil() as u64).max(1)
}

impl GuardCounts for PgLeases {
    fn blocked_for(&self, client: &str) -> LeaseFuture<Option<u64>> {
        let client = client.to_owned();
        self.call(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT EXTRACT(EPOCH FROM blocked_until - now())::float8 \
                     FROM mailroom_guard WHERE client = $1 AND blocked_until > now()",
                    &[&client],
                )
                .await
                .map_err(failed)?;
            Ok(row.map(|r| wait_secs(r.get(0))))
        })
    }

    fn failed(&self, client: &str, burst: u32, refill_seconds: u64) -> LeaseFuture<Option<u64>> {
        let client = client.to_owned();
        let (burst, refill) = (f64::from(burst), refill_seconds.max(1) as f64);
        self.call(move |c| async move {
            // The level leaks one per `refill` seconds since the last failure; this
            // failure adds one; past the burst, the client waits one refill.
            let row = c
                .query_one(
                    "WITH swept AS (DELETE FROM mailroom_guard \
                         WHERE at < now() - interval '1 hour' AND client <> $1 \
                           AND (SELECT random()) < 0.01) \
                     INSERT INTO mailroom_guard AS g (client, level, at, blocked_until) \
                     VALUES ($1, 1, now(), CASE WHEN 1 > $2::float8 THEN now() + make_interval(secs => $3::float8) END) \
                     ON CONFLICT (client) DO UPDATE SET \
                         level = GREATEST(0, g.level - EXTRACT(EPOCH FROM now() - g.at) / $3::float8) + 1, \
                         at = now(), \
                         blocked_until = CASE \
                             WHEN GREATEST(0, g.level - EXTRACT(EPOCH FROM now() - g.at) / $3::float8) + 1 > $2::float8 \
                             THEN GREATEST(g.blocked_until, now() + make_interval(secs => $3::float8)) \
                             ELSE g.blocked_until END \
                     RETURNING CASE WHEN blocked_until > now() \
                         THEN EXTRACT(EPOCH FROM blocked_until - now())::float8 END",
                    &[&client, &burst, &refill],
                )
                .await
                .map_err(failed)?;
            let left: Option<f64> = row.get(0);
            Ok(left.map(wait_secs))
        })
    }
}
