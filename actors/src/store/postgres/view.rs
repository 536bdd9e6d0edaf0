//! A node's view of the key space: the global keys, and the projects it owns. A project
//! is loaded when its lease is taken and forgotten when it is handed over; the global
//! keys that other nodes write (`projects/`, `keys/`) are read again on demand.

use std::collections::HashSet;
use std::ops::Bound::{Excluded, Included, Unbounded};

use super::db::{Bytes, Map};
use super::{lock, Shared};
use crate::error::Result;
use crate::id::ProjectId;
use crate::store::keys;
use crate::store::sled_store::prefix_end;

/// The global indexes whose keys carry the project right after their tag; the timers
/// carry it after their due time and kind (`keys::project_of`).
const INDEXES: [&[u8]; 6] = [
    keys::OUTBOX,
    keys::SENDING_CAMPAIGNS,
    keys::ERASURES,
    keys::IMPORTS,
    keys::READY,
    keys::ALL_DOMAINS,
];

/// Every key of `p` in the map.
fn keys_of(map: &Map, p: ProjectId) -> Vec<Bytes> {
    let mut found = Vec::new();
    let mut range = |start: Vec<u8>| {
        let end = prefix_end(&start);
        let upper = match &end {
            Some(e) => Excluded(e.as_slice()),
            None => Unbounded,
        };
        found.extend(
            map.range::<_, [u8]>((Included(start.as_slice()), upper))
                .map(|(k, _)| k.clone()),
        );
    };
    range([b"p/".as_slice(), p.as_bytes()].concat());
    for tag in INDEXES {
        range([tag, p.as_bytes()].concat());
    }
    // The indexes ordered by time first: every entry is looked at.
    for tag in [keys::TIMERS, keys::WEBHOOK_DUE] {
        let end = prefix_end(tag).map(|e| e.to_vec());
        let upper = match &end {
            Some(e) => Excluded(e.as_slice()),
            None => Unbounded,
        };
        found.extend(
            map.range::<_, [u8]>((Included(tag), upper))
                .filter(|(k, _)| keys::project_of(k) == Some(p))
                .map(|(k, _)| k.clone()),
        );
    }
    found
}

impl Shared {
    pub(super) fn load_project(&self, p: ProjectId) -> Result<()> {
        let started = std::time::Instant::now();
        let loaded = self.db.project(p)?;
        // Writes of p this node still had queued are from before it lost p: they are
        // not in the database's copy, and will not be.
        self.drop_pending(p);
        let pairs = loaded.len();
        {
            let mut base = self.base.write().unwrap_or_else(|e| e.into_inner());
            for k in keys_of(&base, p) {
                base.remove(&*k);
            }
            for (k, v) in loaded {
                base.insert(k, v);
            }
        }
        tracing::info!(
            project = %p,
            pairs,
            millis = started.elapsed().as_millis() as u64,
            "loaded a project from PostgreSQL"
        );
        Ok(())
    }

    pub(super) fn unload_project(&self, p: ProjectId) {
        self.drop_pending(p);
        let mut base = self.base.write().unwrap_or_else(|e| e.into_inner());
        for k in keys_of(&base, p) {
            base.remove(&*k);
        }
    }

    /// Reads the prefix from PostgreSQL without holding up the commits, then swaps it
    /// in under `committing` (no commit in between). A key this node committed while
    /// the read ran keeps the value it committed: the read may predate that commit,
    /// and putting back an older value would undo an acknowledged write on this node.
    pub(super) fn reload_prefix(&self, prefix: &[u8]) -> Result<()> {
        let _one_reload = lock(&self.reloading);
        *lock(&self.moved_while_reading) = Some(Vec::new());
        let end = prefix_end(prefix);
        let read = self.db.range(prefix.to_vec(), end.clone());
        let _no_commit = lock(&self.committing);
        let moved: HashSet<Vec<u8>> = lock(&self.moved_while_reading)
            .take()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let fresh = read?;
        let mut base = self.base.write().unwrap_or_else(|e| e.into_inner());
        let upper = match &end {
            Some(e) => Excluded(e.as_slice()),
            None => Unbounded,
        };
        let kept = |k: &[u8]| moved.contains(k);
        let stale: Vec<Bytes> = base
            .range::<_, [u8]>((Included(prefix), upper))
            .map(|(k, _)| k.clone())
            .filter(|k| !kept(k))
            .collect();
        for k in stale {
            base.remove(&*k);
        }
        for (k, v) in fresh {
            if !kept(&k) {
                base.insert(k, v);
            }
        }
        Ok(())
    }
}
