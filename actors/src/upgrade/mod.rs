//! Upgrades of a data directory written in an older key layout (`keys::FORMAT`): an
//! ordered list of migrations, each from layout N to N + 1, run in place when the store
//! is opened, before anything else reads it. Every mailroom command opens the store
//! through `open`, so a new version migrates the data on its first start.
//!
//! A migration goes in slices of at most `slice` records; each slice's writes and the
//! progress record (`keys::UPGRADE_PROGRESS_KEY`) go in one atomic batch, so a crash
//! resumes after the last slice that reached the disk. The layout mark moves to N + 1 in
//! the batch that ends migration N.

mod v5_to_v6;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::{codec, keys, Batch, SledConfig, SledStore, Store};

/// One slice of a migration: its writes, where the next slice starts (`None` when the
/// migration is done) and how many records it went through (for the progress log).
pub struct Slice {
    pub batch: Batch,
    pub next: Option<Vec<u8>>,
    pub records: u64,
}

/// One slice of at most `slice` records, starting at the cursor a previous slice
/// returned (`None`: the start).
pub type Step = fn(store: &dyn Store, cursor: Option<&[u8]>, slice: usize) -> Result<Slice>;

/// Migrates a store from layout `from` to `from + 1`.
pub struct Migration {
    pub from: u32,
    pub what: &'static str,
    pub step: Step,
}

/// The key layout this version writes; a backup in another layout is migrated on
/// restore.
pub const KEY_FORMAT: u32 = keys::FORMAT;

/// Every migration, oldest first: from `keys::OLDEST_UPGRADABLE` up to `keys::FORMAT`.
pub const MIGRATIONS: &[Migration] = &[Migration {
    from: 5,
    what:
        "recount each workflow's ended executions (every way an execution ends counts in layout 6)",
    step: v5_to_v6::step,
}];

/// How often a long migration logs its progress and syncs what it has done.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Opens the store at `path` and brings it up to this version's layout.
pub fn open(path: &Path, config: SledConfig, slice: usize) -> Result<Arc<SledStore>> {
    let (store, layout) = SledStore::open_any_layout(path, config)?;
    if layout != keys::FORMAT {
        tracing::info!(
            data_dir = %path.display(),
            from = layout,
            to = keys::FORMAT,
            "upgrading the data directory to this version's key layout"
        );
        upgrade(&*store, layout, slice)?;
    }
    Ok(store)
}

/// Runs every migration from `layout` on; the records gone through.
pub fn upgrade(store: &dyn Store, layout: u32, slice: usize) -> Result<u64> {
    let mut records = 0;
    for from in layout..keys::FORMAT {
        let m = MIGRATIONS.iter().find(|m| m.from == from).ok_or_else(|| {
            Error::storage(format!(
                "no migration from key layout {from} to {}",
                from + 1
            ))
        })?;
        records += run(store, m, slice.max(1))?;
    }
    Ok(records)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Progress {
    from: u32,
    cursor: Vec<u8>,
}

/// Runs one migration to its end, from where an earlier run stopped; the records gone
/// through in this run.
pub fn run(store: &dyn Store, m: &Migration, slice: usize) -> Result<u64> {
    let mut cursor = match store.get(keys::UPGRADE_PROGRESS_KEY)? {
        Some(b) => {
            let p: Progress = codec::decode(&b)?;
            (p.from == m.from).then_some(p.cursor)
        }
        None => None,
    };
    let (from, to) = (m.from, m.from + 1);
    if cursor.is_some() {
        tracing::info!(from, to, "resuming a migration cut short");
    }
    tracing::info!(from, to, migration = m.what, "migration started");
    let started = Instant::now();
    let mut logged = started;
    let mut records = 0u64;
    loop {
        let Slice {
            mut batch,
            next,
            records: n,
        } = (m.step)(store, cursor.as_deref(), slice)?;
        records += n;
        match next {
            Some(next) => {
                batch.put(
                    keys::UPGRADE_PROGRESS_KEY,
                    codec::encode(&Progress {
                        from,
                        cursor: next.clone(),
                    })?,
                );
                store.apply(batch)?;
                cursor = Some(next);
            }
            None => {
                batch.delete(keys::UPGRADE_PROGRESS_KEY);
                batch.put(keys::FORMAT_KEY, to.to_be_bytes().to_vec());
                store.apply(batch)?;
                store.flush_blocking()?;
                tracing::info!(
                    from,
                    to,
                    records,
                    millis = started.elapsed().as_millis() as u64,
                    "migration done"
                );
                return Ok(records);
            }
        }
        if logged.elapsed() >= PROGRESS_EVERY {
            store.flush_blocking()?;
            logged = Instant::now();
            tracing::info!(from, to, records, "migration under way");
        }
    }
}
