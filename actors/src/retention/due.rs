//! Cheap read-only checks, off the project's actor, of whether a kind has anything old
//! enough to remove: the purge sends a project's actor no slice (and starts no actor of
//! an idle project) for a kind with nothing to do. Each reads the oldest record or two.

use crate::error::Result;
use crate::model::{ProjectId, Timestamp};
use crate::store::{keys, Store};

pub fn idempotency(store: &dyn Store, p: ProjectId, now: Timestamp) -> Result<bool> {
    let prefix = keys::idempotency_expiries(p);
    match store.scan(&prefix, None, false).next() {
        Some(kv) => {
            let key = kv?.0;
            let at = key[prefix.len()..].first_chunk::<8>().copied();
            Ok(at.is_none_or(|at| u64::from_be_bytes(at) as i64 <= now.millis()))
        }
        None => Ok(false),
    }
}
