//! The lease table on PostgreSQL (`cluster::leases::Leases`): `mailroom_nodes` and
//! `mailroom_leases` (schema migration 2). Each call is one statement on the store's
//! runtime, and every time in it is the server's `now()`: the nodes' own clocks never
//! decide who holds a lease.
//!
//! Lease rows are never deleted, so a project's epoch only grows: (project, epoch)
//! names one holding for good, which is what the commit's fence check compares.
//!
//! A lease is held by a process (`holder`, the store's random `Db::process`) of a node,
//! not by the node id alone: the epoch goes up whenever the (node id, process) pair
//! changes, and renew, release and the commit's fence check the process too. So a
//! process paused (SIGSTOP) while a replacement with the same `cluster.node_id`
//! started can no longer write once it resumes. The replacement takes a lease that is
//! still running from an earlier process of its node only when that process has no
//! connection to the server left (`pg_stat_activity`, by `application_name`): a
//! process killed with kill -9 has none (the kernel closed its sockets), so a restart
//! takes its leases back at once; a paused one still has its connections, so the
//! lease must run out first, by which time the paused process's own deadline has
//! passed too and it sends nothing more.
//!
//! A second live process started with the node id of a running one is not refused at
//! start: it gets none of the leases the first one holds and renews (its requests for
//! those projects are answered 503 with Retry-After), and the two overwrite each
//! other's advertise URL in `mailroom_nodes`. Giving each process its own
//! `cluster.node_id` is the operator's part (docs/cluster.md).

use std::sync::Arc;

use deadpool_postgres::Pool;

use super::db::{connecting, failed, project_id, timed_out, GRACE};
use super::Shared;
use crate::cluster::leases::{Holder, LeaseFuture, Leases, Node};
use crate::error::{Error, Result};
use crate::id::ProjectId;

pub struct PgLeases {
    /// The store's runtime and pool live as long as this does.
    shared: Arc<Shared>,
}

impl PgLeases {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        PgLeases { shared }
    }

    /// Runs one call on a pooled connection on the store's runtime.
    fn process(&self) -> Vec<u8> {
        self.shared.db.process.to_vec()
    }

    pub(super) fn call<T, F, Fut>(&self, f: F) -> LeaseFuture<T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T>> + Send,
    {
        let (pool, at): (Pool, String) =
            (self.shared.db.pool.clone(), self.shared.db.place.clone());
        let limit = self.shared.db.limit;
        Box::pin(self.shared.db.spawn(async move {
            // The lease loop awaits these: one must never hang it past a lease.
            tokio::time::timeout(limit + GRACE, async move {
                let client = pool.get().await.map_err(|e| connecting(&at, e))?;
                f(client).await
            })
            .await
            .unwrap_or_else(|_| Err(timed_out("a lease call", limit)))
        }))
    }
}

/// Seconds as the `interval` PostgreSQL adds to `now()`.
fn secs(lease_seconds: u64) -> f64 {
    lease_seconds as f64
}

fn epoch_of(e: i64) -> Result<u64> {
    u64::try_from(e).map_err(|_| Error::storage("a lease epoch in PostgreSQL is negative"))
}

impl Leases for PgLeases {
    fn heartbeat(&self, node_id: &str, advertise_url: &str) -> LeaseFuture<()> {
        let (id, url) = (node_id.to_owned(), advertise_url.to_owned());
        self.call(move |c| async move {
            c.execute(
                "INSERT INTO mailroom_nodes (node_id, advertise_url, started_at, heartbeat_at) \
                 VALUES ($1, $2, now(), now()) \
                 ON CONFLICT (node_id) DO UPDATE \
                 SET advertise_url = EXCLUDED.advertise_url, heartbeat_at = now()",
                &[&id, &url],
            )
            .await
            .map_err(failed)?;
            Ok(())
        })
    }

    fn live_nodes(&self, lease_seconds: u64) -> LeaseFuture<Vec<Node>> {
        self.call(move |c| async move {
            let rows = c
                .query(
                    "SELECT node_id, advertise_url FROM mailroom_nodes \
                     WHERE heartbeat_at > now() - make_interval(secs => $1) ORDER BY node_id",
                    &[&secs(lease_seconds)],
                )
                .await
                .map_err(failed)?;
            Ok(rows
                .iter()
                .map(|r| Node {
                    id: r.get(0),
                    url: r.get(1),
                })
                .collect())
        })
    }

    fn try_acquire(
        &self,
        p: ProjectId,
        node_id: &str,
        lease_seconds: u64,
    ) -> LeaseFuture<Option<u64>> {
        let (id, me) = (node_id.to_owned(), self.process());
        self.call(move |c| async move {
            // The conflict branch sees the row locked, so two nodes racing for an
            // expired lease take turns, and the second finds it live and ours-not.
            let row = c
                .query_opt(
                    "INSERT INTO mailroom_leases AS l (project, node_id, holder, epoch, expires_at) \
                     VALUES ($1, $2, $4, 1, now() + make_interval(secs => $3)) \
                     ON CONFLICT (project) DO UPDATE \
                     SET node_id = EXCLUDED.node_id, holder = EXCLUDED.holder, \
                         epoch = CASE WHEN l.node_id = EXCLUDED.node_id \
                                       AND l.holder = EXCLUDED.holder THEN l.epoch \
                                      ELSE l.epoch + 1 END, \
                         expires_at = EXCLUDED.expires_at \
                     WHERE (l.node_id = EXCLUDED.node_id AND l.holder = EXCLUDED.holder) \
                        OR l.expires_at <= now() \
                        OR (l.node_id = EXCLUDED.node_id AND NOT EXISTS ( \
                             SELECT 1 FROM pg_stat_activity \
                             WHERE application_name = 'mailroom ' || encode(l.holder, 'hex'))) \
                     RETURNING epoch",
                    &[&p.as_bytes().as_slice(), &id, &secs(lease_seconds), &me],
                )
                .await
                .map_err(failed)?;
            row.map(|r| epoch_of(r.get(0))).transpose()
        })
    }

    fn renew(
        &self,
        p: ProjectId,
        node_id: &str,
        epoch: u64,
        lease_seconds: u64,
    ) -> LeaseFuture<bool> {
        let (id, me) = (node_id.to_owned(), self.process());
        self.call(move |c| async move {
            let n = c
                .execute(
                    "UPDATE mailroom_leases SET expires_at = now() + make_interval(secs => $4) \
                     WHERE project = $1 AND node_id = $2 AND epoch = $3 AND holder = $5",
                    &[
                        &p.as_bytes().as_slice(),
                        &id,
                        &(epoch as i64),
                        &secs(lease_seconds),
                        &me,
                    ],
                )
                .await
                .map_err(failed)?;
            Ok(n == 1)
        })
    }

    fn renew_all(
        &self,
        held: Vec<(ProjectId, u64)>,
        node_id: &str,
        lease_seconds: u64,
    ) -> LeaseFuture<Vec<ProjectId>> {
        let (id, me) = (node_id.to_owned(), self.process());
        self.call(move |c| async move {
            if held.is_empty() {
                return Ok(Vec::new());
            }
            let projects: Vec<&[u8]> = held.iter().map(|(p, _)| p.as_bytes().as_slice()).collect();
            let epochs: Vec<i64> = held.iter().map(|(_, e)| *e as i64).collect();
            let rows = c
                .query(
                    "UPDATE mailroom_leases l SET expires_at = now() + make_interval(secs => $3) \
                     FROM unnest($4::bytea[], $5::bigint[]) AS h(project, epoch) \
                     WHERE l.project = h.project AND l.epoch = h.epoch \
                       AND l.node_id = $1 AND l.holder = $2 \
                     RETURNING l.project",
                    &[&id, &me, &secs(lease_seconds), &projects, &epochs],
                )
                .await
                .map_err(failed)?;
            let renewed: std::collections::HashSet<Vec<u8>> =
                rows.iter().map(|r| r.get::<_, Vec<u8>>(0)).collect();
            Ok(held
                .iter()
                .filter(|(p, _)| !renewed.contains(p.as_bytes().as_slice()))
                .map(|(p, _)| *p)
                .collect())
        })
    }

    fn release(&self, p: ProjectId, node_id: &str, epoch: u64) -> LeaseFuture<()> {
        let (id, me) = (node_id.to_owned(), self.process());
        self.call(move |c| async move {
            c.execute(
                "UPDATE mailroom_leases SET expires_at = now() \
                 WHERE project = $1 AND node_id = $2 AND epoch = $3 AND holder = $4",
                &[&p.as_bytes().as_slice(), &id, &(epoch as i64), &me],
            )
            .await
            .map_err(failed)?;
            Ok(())
        })
    }

    fn holder(&self, p: ProjectId) -> LeaseFuture<Option<Holder>> {
        self.call(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT l.node_id, n.advertise_url, \
                         (extract(epoch FROM l.expires_at) * 1000)::bigint \
                     FROM mailroom_leases l JOIN mailroom_nodes n ON n.node_id = l.node_id \
                     WHERE l.project = $1",
                    &[&p.as_bytes().as_slice()],
                )
                .await
                .map_err(failed)?;
            Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
        })
    }

    fn leases_of(&self, node_id: &str) -> LeaseFuture<Vec<(ProjectId, u64)>> {
        let id = node_id.to_owned();
        self.call(move |c| async move {
            let rows = c
                .query(
                    "SELECT project, epoch FROM mailroom_leases WHERE node_id = $1 \
                     ORDER BY project",
                    &[&id],
                )
                .await
                .map_err(failed)?;
            rows.iter()
                .map(|r| Ok((project_id(r.get(0))?, epoch_of(r.get(1))?)))
                .collect()
        })
    }
}
