//! Cheap read-only checks, off the project's actor, of whether a kind has anything old
//! enough to remove: the purge sends a project's actor no slice (and starts no actor of
//! an idle project) for a kind with nothing to do. Each reads the oldest record or two.

use crate::error::Result;
use crate::model::{EventId, Execution, OutboundEmail, ProjectId, Timestamp};
use crate::store::{blocks, keys, Store};

pub fn events(store: &dyn Store, p: ProjectId, before: Timestamp) -> Result<bool> {
    let oldest = blocks::oldest(store, &keys::events(p))?;
    Ok(oldest.is_some_and(|id| id < *EventId::floor(before).as_bytes()))
}

/// Whether the first email after `after` was created before `before`.
pub fn emails(store: &dyn Store, p: ProjectId, before: i64, after: Option<&[u8]>) -> Result<bool> {
    match store.scan(&keys::emails(p), after, false).next() {
        Some(kv) => Ok(OutboundEmail::decode(&kv?.1).is_ok_and(|e| e.created_at < before)),
        None => Ok(false),
    }
}

pub fn executions(store: &dyn Store, p: ProjectId, before: i64) -> Result<bool> {
    match store.scan(&keys::executions(p), None, false).next() {
        Some(kv) => Ok(Execution::decode(&kv?.1).is_ok_and(|e| e.started_at < before)),
        None => Ok(false),
    }
}

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

/// Whether any campaign still keeps audience chunks (whether its campaign ended long
/// enough ago is for the slice to judge).
pub fn audiences(store: &dyn Store, p: ProjectId) -> Result<bool> {
    Ok(store
        .scan(&keys::campaign_audiences(p), None, false)
        .next()
        .transpose()?
        .is_some())
}

/// Whether the project has any campaign unsubscribe marker (an ended campaign's may go).
pub fn unsubscribes(store: &dyn Store, p: ProjectId) -> Result<bool> {
    let prefix = keys::campaign_unsubscribed_all(p);
    Ok(store
        .scan(&prefix, None, false)
        .next()
        .transpose()?
        .is_some())
}

/// Whether the project has any workflow entry window record.
pub fn entries(store: &dyn Store, p: ProjectId) -> Result<bool> {
    Ok(store
        .scan(&keys::all_entries(p), None, false)
        .next()
        .transpose()?
        .is_some())
}

/// Whether the project has any import record at all (finished ones are what may go).
pub fn imports(store: &dyn Store, p: ProjectId) -> Result<bool> {
    Ok(store
        .scan(&keys::imports_of(p), None, false)
        .next()
        .transpose()?
        .is_some())
}
