//! The suppression list as stored: the entry under its address's hash, a time index
//! that pages walk newest first, and a count per reason.

use super::{hash, Reason, Suppression};
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{codec, keys, Batch, Store};

/// The entry for `email`, if the address is on the list now (a lifted soft-bounce
/// entry is not).
pub fn lookup(
    store: &dyn Store,
    p: ProjectId,
    email: &str,
    now_ms: i64,
) -> Result<Option<Suppression>> {
    Ok(load(store, p, &hash(email))?.filter(|s| s.applies(now_ms)))
}

pub(crate) fn load(
    store: &dyn Store,
    p: ProjectId,
    hash: &[u8; 32],
) -> Result<Option<Suppression>> {
    store
        .get(&keys::suppression(p, hash))?
        .map(|b| codec::decode(&b))
        .transpose()
}

fn count(store: &dyn Store, p: ProjectId, reason: Reason) -> Result<u64> {
    Ok(store
        .get(&keys::suppression_count(p, reason.byte()))?
        .and_then(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
        .unwrap_or(0))
}

/// Entries on the list, per reason, or in all.
pub fn total(store: &dyn Store, p: ProjectId, reason: Option<Reason>) -> Result<u64> {
    match reason {
        Some(r) => count(store, p, r),
        None => Reason::ALL
            .iter()
            .try_fold(0, |n, r| Ok(n + count(store, p, *r)?)),
    }
}

fn by_time(p: ProjectId, id: &uuid::Uuid) -> Vec<u8> {
    keys::with_id(&keys::suppressions_by_time(p), id.as_bytes())
}

/// Writes `s` in `batch`, replacing whatever entry its address had (`before`, as
/// stored): the counts and the time index follow. Call it once per address per batch.
pub fn put(
    batch: &mut Batch,
    store: &dyn Store,
    p: ProjectId,
    before: Option<&Suppression>,
    s: &Suppression,
) -> Result<()> {
    let mut delta = [0i64; 4];
    put_uncounted(batch, p, before, s, &mut delta)?;
    write_counts(batch, store, p, delta)
}

/// `put` without writing the counts: their change goes into `delta` (per reason), for
/// a caller that writes many entries and the counts once (`write_counts`).
pub(crate) fn put_uncounted(
    batch: &mut Batch,
    p: ProjectId,
    before: Option<&Suppression>,
    s: &Suppression,
    delta: &mut [i64; 4],
) -> Result<()> {
    if let Some(old) = before {
        batch.delete(by_time(p, &old.id));
        delta[old.reason.byte() as usize] -= 1;
    }
    delta[s.reason.byte() as usize] += 1;
    batch.put(keys::suppression(p, &s.hash), codec::encode(s)?);
    batch.put(by_time(p, &s.id), s.hash.to_vec());
    Ok(())
}

pub(crate) fn write_counts(
    batch: &mut Batch,
    store: &dyn Store,
    p: ProjectId,
    delta: [i64; 4],
) -> Result<()> {
    for r in Reason::ALL {
        let d = delta[r.byte() as usize];
        if d != 0 {
            let n = (count(store, p, r)? as i64 + d).max(0) as u64;
            batch.put(
                keys::suppression_count(p, r.byte()),
                n.to_le_bytes().to_vec(),
            );
        }
    }
    Ok(())
}

/// Puts `s` on the list (a report's doing), in `batch`: an address on it already keeps
/// its entry, unless that entry lifts (a soft bounce's) and this one does not. Answers
/// whether it wrote.
pub fn suppress(
    batch: &mut Batch,
    store: &dyn Store,
    p: ProjectId,
    s: &Suppression,
) -> Result<bool> {
    let before = load(store, p, &s.hash)?;
    if let Some(old) = before.as_ref().filter(|old| old.applies(s.created_at)) {
        if old.expires_at.is_none() || s.expires_at.is_some() {
            return Ok(false);
        }
    }
    put(batch, store, p, before.as_ref(), s)?;
    Ok(true)
}

/// Takes the address off the list; false when it was not on it.
pub fn remove(batch: &mut Batch, store: &dyn Store, p: ProjectId, email: &str) -> Result<bool> {
    let Some(old) = load(store, p, &hash(email))? else {
        return Ok(false);
    };
    batch.delete(keys::suppression(p, &old.hash));
    batch.delete(by_time(p, &old.id));
    let mut delta = [0i64; 4];
    delta[old.reason.byte() as usize] -= 1;
    write_counts(batch, store, p, delta)?;
    Ok(true)
}

/// The contact of `email` is deleted: its entry keeps only the hash, and still applies.
pub fn forget_address(
    batch: &mut Batch,
    store: &dyn Store,
    p: ProjectId,
    email: &str,
) -> Result<()> {
    if let Some(mut s) = load(store, p, &hash(email))? {
        if s.email.take().is_some() {
            batch.put(keys::suppression(p, &s.hash), codec::encode(&s)?);
        }
    }
    Ok(())
}

/// Up to `limit` entries after `after` (an entry's id), newest first, of one reason or
/// all; and whether more follow.
pub fn page(
    store: &dyn Store,
    p: ProjectId,
    reason: Option<Reason>,
    after: Option<uuid::Uuid>,
    limit: usize,
) -> Result<(Vec<Suppression>, bool)> {
    let prefix = keys::suppressions_by_time(p);
    let from = after.map(|id| by_time(p, &id));
    let mut out = Vec::with_capacity(limit + 1);
    for kv in store.scan(&prefix, from.as_deref(), true) {
        let (_, v) = kv?;
        let Ok(h) = <[u8; 32]>::try_from(v.as_slice()) else {
            continue;
        };
        let Some(s) = load(store, p, &h)? else {
            continue;
        };
        if reason.is_none_or(|r| r == s.reason) {
            out.push(s);
            if out.len() > limit {
                break;
            }
        }
    }
    let more = out.len() > limit;
    out.truncate(limit);
    Ok((out, more))
}
