//! Per-project counters (contacts, subscribed, events, segment members, ...): one key
//! each, read and written in the batch that changes what they count. A leaf: every
//! feature that counts uses it, and it uses none of them.

use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{codec, keys, Batch, Store};

pub fn read_counter(store: &dyn Store, p: ProjectId, name: &str) -> Result<u64> {
    Ok(store
        .get(&keys::counter(p, name))?
        .map(|b| codec::decode_u64(&b))
        .unwrap_or(0))
}

/// Adds `delta` to a counter, in `batch`.
pub fn add_to_counter(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    name: &str,
    delta: i64,
) -> Result<()> {
    let n = read_counter(store, p, name)?;
    batch.put(
        keys::counter(p, name),
        codec::encode_u64(n.saturating_add_signed(delta)),
    );
    Ok(())
}
