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

const CONTACTS: &str = "contacts";
const SUBSCRIBED: &str = "subscribed";
const DATA_BYTES: &str = "data-bytes";

/// The counters a project actor keeps in memory and in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProjectCounts {
    pub contacts: u64,
    pub subscribed: u64,
    /// Bytes of `data` (as JSON) over all contacts.
    pub data_bytes: u64,
}

impl ProjectCounts {
    pub fn load(store: &dyn Store, p: ProjectId) -> Result<Self> {
        Ok(ProjectCounts {
            contacts: read_counter(store, p, CONTACTS)?,
            subscribed: read_counter(store, p, SUBSCRIBED)?,
            data_bytes: read_counter(store, p, DATA_BYTES)?,
        })
    }

    /// Writes the counters that differ from `before`: most updates change neither,
    /// and every key left out is one less to log and move into sled.
    pub fn write_changed(&self, before: &ProjectCounts, batch: &mut Batch, p: ProjectId) {
        if self.contacts != before.contacts {
            batch.put(keys::counter(p, CONTACTS), codec::encode_u64(self.contacts));
        }
        if self.data_bytes != before.data_bytes {
            batch.put(
                keys::counter(p, DATA_BYTES),
                codec::encode_u64(self.data_bytes),
            );
        }
        if self.subscribed != before.subscribed {
            batch.put(
                keys::counter(p, SUBSCRIBED),
                codec::encode_u64(self.subscribed),
            );
        }
    }
}
