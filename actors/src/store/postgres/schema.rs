//! The tables, created and migrated by Mailroom itself when the store opens. Each
//! migration runs once, in order, in the same transaction as the version it records, so
//! a crash leaves the schema at one version or the next, never between.
//!
//! The key space is one table: keys are compared as bytes (bytea, memcmp order, the
//! order sled keeps), so a prefix scan is a range scan of the primary key's index. All
//! of a project's keys start with `p/<16-byte id>` (see `keys`), so a project's data is
//! one index range, read or deleted with `key >= p/<id> AND key < p/<id+1>`.

use tokio_postgres::Client;

use super::db::failed;
use crate::error::{Error, Result};

/// Migration n brings the schema from version n to n + 1.
const MIGRATIONS: &[&str] = &[
    // 1: the key space.
    "CREATE TABLE kv (key bytea PRIMARY KEY, value bytea NOT NULL)",
];

/// The schema version this build writes and reads.
pub const VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings the schema up to `VERSION`. Two processes starting at once on one schema
/// take turns (a transaction-scoped advisory lock), so each migration runs once.
pub async fn migrate(client: &Client) -> Result<()> {
    client
        .batch_execute(
            "BEGIN; \
             SELECT pg_advisory_xact_lock(hashtext('mailroom schema ' || current_schema())); \
             CREATE TABLE IF NOT EXISTS mailroom_schema (version integer NOT NULL)",
        )
        .await
        .map_err(failed)?;
    let outcome = steps(client).await;
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
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        client.batch_execute(sql).await.map_err(failed)?;
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
