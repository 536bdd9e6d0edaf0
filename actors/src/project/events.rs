//! Appending events to a batch: the record, its by-contact and by-name index entries,
//! and the per-name statistics (count and last seen) that `GET /events/names` serves.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{Event, ProjectId};
use crate::store::{codec, keys, Batch, Store};

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NameStats {
    pub count: u64,
    pub last_seen_at: i64,
}

pub fn name_stats_key(p: ProjectId, name: &str) -> Vec<u8> {
    format!("p/{p}/names/{name}").into_bytes()
}

/// Adds `event` to `batch`. Callers are the project's actor, so the read-modify-write
/// of the name statistics cannot race with another writer of the same project.
pub fn append(store: &dyn Store, batch: &mut Batch, p: ProjectId, event: &Event) -> Result<()> {
    batch.put(keys::event(p, event.id), event.encode()?);
    batch.put(
        keys::event_by_contact(p, event.contact_id, event.id),
        Vec::new(),
    );
    batch.put(keys::event_by_name(p, &event.name, event.id), Vec::new());
    let stats_key = name_stats_key(p, &event.name);
    let mut stats: NameStats = match store.get(&stats_key)? {
        Some(bytes) => codec::decode(&bytes)?,
        None => NameStats::default(),
    };
    stats.count += 1;
    stats.last_seen_at = stats.last_seen_at.max(event.created_at.millis());
    batch.put(stats_key, codec::encode(&stats)?);
    Ok(())
}
