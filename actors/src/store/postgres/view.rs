//! A node's view of the key space: the global keys, and the projects it owns. A project
//! is loaded when its lease is taken and forgotten when it is handed over; the global
//! keys that other nodes write (`projects/`, `keys/`) are read again on demand.

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
    let timers = prefix_end(keys::TIMERS).map(|e| e.to_vec());
    let upper = match &timers {
        Some(e) => Excluded(e.as_slice()),
        None => Unbounded,
    };
    found.extend(
        map.range::<_, [u8]>((Included(keys::TIMERS), upper))
            .filter(|(k, _)| keys::project_of(k) == Some(p))
            .map(|(k, _)| k.clone()),
    );
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

    /// One commit at a time holds `committing`, so none moves a value into the map
    /// between the read and the swap (which would put back an older value).
    pub(super) fn reload_prefix(&self, prefix: &[u8]) -> Result<()> {
        let _one = lock(&self.committing);
        let end = prefix_end(prefix);
        let fresh = self.db.range(prefix.to_vec(), end.clone())?;
        let mut base = self.base.write().unwrap_or_else(|e| e.into_inner());
        let upper = match &end {
            Some(e) => Excluded(e.as_slice()),
            None => Unbounded,
        };
        let stale: Vec<Bytes> = base
            .range::<_, [u8]>((Included(prefix), upper))
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            base.remove(&*k);
        }
        for (k, v) in fresh {
            base.insert(k, v);
        }
        Ok(())
    }
}
