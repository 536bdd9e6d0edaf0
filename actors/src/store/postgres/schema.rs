//! The tables, created and migrated by Mailroom itself when the store opens. Each
//! migration runs once, in order, in the same transaction as the version it records, so
//! a crash leaves the schema at one version or the next, never between.
//!
//! The key space is one table: keys are compared as bytes (bytea, memcmp order, the
//! order sled keeps), so a prefix scan is a range scan of the primary key's index. Each
//! pair also names its project (`keys::project_of`, NULL for a global key), so a node
//! loads the projects it owns, and the global keys, with one index lookup each.
//!
//! The nodes of a cluster and the leases of the projects are two tables beside it
//! (`leases.rs`); their times are the server's `now()`, one clock for every node.

use futures_util::{pin_mut, TryStreamExt};
use tokio_postgres::Client;

use super::db::failed;
use crate::error::{Error, Result};
use crate::store::keys;

/// What one migration does.
enum Step {
    Sql(&'static str),
    /// The project of every pair, computed here from its key (`keys::project_of` is the
    /// one definition of it; SQL would be a second).
    BackfillProjects,
}

/// Migration n brings the schema from version n to n + 1; its steps run in order.
const MIGRATIONS: &[&[Step]] = &[
    // 1: the key space.
    &[Step::Sql(
        "CREATE TABLE kv (key bytea PRIMARY KEY, value bytea NOT NULL)",
    )],
    // 2: several nodes. Each pair names its project; nodes heartbeat; a project's owner
    // holds a lease whose epoch every commit of the project checks (fencing).
    &[
        Step::Sql("ALTER TABLE kv ADD COLUMN project bytea"),
        Step::BackfillProjects,
        // After the backfill: one index build instead of an update per entry.
        Step::Sql(
            "CREATE INDEX kv_project ON kv (project); \
             CREATE TABLE mailroom_nodes (node_id text PRIMARY KEY, \
                 advertise_url text NOT NULL, started_at timestamptz NOT NULL, \
                 heartbeat_at timestamptz NOT NULL); \
             CREATE TABLE mailroom_leases (project bytea PRIMARY KEY, \
                 node_id text NOT NULL, epoch bigint NOT NULL, \
                 expires_at timestamptz NOT NULL)",
        ),
    ],
    // 3: a lease names the process that holds it (`db::Db::process`), so two processes
    // with one node id never share an epoch. Rows of version 2 name none: the next
    // acquire of each moves it to a new epoch.
    &[Step::Sql(
        "ALTER TABLE mailroom_leases ADD COLUMN holder bytea NOT NULL DEFAULT ''::bytea",
    )],
    // Failed authentication attempts per client, shared by the nodes (`guard.rs`).
    &[Step::Sql(
        "CREATE TABLE mailroom_guard (client text PRIMARY KEY, \
             level double precision NOT NULL, at timestamptz NOT NULL, \
             blocked_until timestamptz)",
    )],
];

/// The schema version this build writes and reads.
pub const VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings the schema up to `VERSION`. Two processes starting at once on one schema
/// take turns (a transaction-scoped advisory lock), so each migration runs once; a
/// process waits at most `lock_wait_ms` for another's migration before it fails.
pub async fn migrate(client: &Client, lock_wait_ms: u64) -> Result<()> {
    let begun = client
        .batch_execute(&format!(
            "BEGIN; \
             SET LOCAL lock_timeout = {}; \
             SELECT pg_advisory_xact_lock(hashtext('mailroom schema ' || current_schema())); \
             SET LOCAL lock_timeout = 0; \
             SET LOCAL statement_timeout = 0; \
             CREATE TABLE IF NOT EXISTS mailroom_schema (version integer NOT NULL)",
            lock_wait_ms.max(1)
        ))
        .await;
    let outcome = match begun {
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
            Err(Error::storage(format!(
                "another process has been migrating the PostgreSQL schema for over \
                 {lock_wait_ms} ms (storage.postgres.lock_wait_ms); start this one again once \
                 it is done"
            )))
        }
        Err(e) => Err(failed(e)),
        Ok(()) => steps(client).await,
    };
    let end = if outcome.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    client.batch_execute(end).await.map_err(failed)?;
    outcome
}

async fn steps(client: &Client) -> Result<()> {
    let found: i32 = client
        .query_one("SELECT coalesce(max(version), 0) FROM mailroom_schema", &[])
        .await
        .map_err(failed)?
        .get(0);
    if found > VERSION {
        return Err(Error::storage(format!(
            "the PostgreSQL schema is at version {found}, written by a newer Mailroom (this \
             version knows up to {VERSION}); run that version"
        )));
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        for step in migration.iter() {
            match step {
                Step::Sql(sql) => client.batch_execute(sql).await.map_err(failed)?,
                Step::BackfillProjects => backfill_projects(client).await?,
            }
        }
        client
            .execute("DELETE FROM mailroom_schema", &[])
            .await
            .map_err(failed)?;
        client
            .execute(
                "INSERT INTO mailroom_schema (version) VALUES ($1)",
                &[&(from as i32 + 1)],
            )
            .await
            .map_err(failed)?;
        tracing::info!(version = from + 1, "migrated the PostgreSQL schema");
    }
    Ok(())
}

/// Pairs per UPDATE of the backfill: few round trips, no huge parameter.
const BACKFILL_CHUNK: usize = 10_000;

/// Sets `project` on every pair that belongs to one, reading only the keys.
async fn backfill_projects(client: &Client) -> Result<()> {
    let rows = client
        .query_raw("SELECT key FROM kv", std::iter::empty::<&str>())
        .await
        .map_err(failed)?;
    pin_mut!(rows);
    let mut owned: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    while let Some(row) = rows.try_next().await.map_err(failed)? {
        let key: &[u8] = row.get(0);
        if let Some(p) = keys::project_of(key) {
            owned.push((key.to_vec(), p.as_bytes().to_vec()));
        }
    }
    let statement = client
        .prepare(
            "UPDATE kv SET project = u.p FROM unnest($1::bytea[], $2::bytea[]) AS u(k, p) \
             WHERE kv.key = u.k",
        )
        .await
        .map_err(failed)?;
    for chunk in owned.chunks(BACKFILL_CHUNK) {
        let (keys, projects): (Vec<&[u8]>, Vec<&[u8]>) = chunk
            .iter()
            .map(|(k, p)| (k.as_slice(), p.as_slice()))
            .unzip();
        client
            .execute(&statement, &[&keys, &projects])
            .await
            .map_err(failed)?;
    }
    tracing::info!(pairs = owned.len(), "named the project of each stored pair");
    Ok(())
}
