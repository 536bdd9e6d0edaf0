//! The walk that two retention kinds share: campaigns that ended (SENT or CANCELLED, their
//! `updated_at`) before a cutoff, each losing the keys under one prefix of its own
//! (audience chunks, unsubscribe markers), in slices bounded by what they walk.

use crate::campaign::{Campaign, CampaignStatus};
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{keys, Batch, Store};

use crate::store::Slice;

/// Walks the campaigns after `after` that ended before `before`; for each, `also` may add
/// to the batch first, then the keys under `prefix_of(campaign)` are deleted. Every
/// campaign read and every key removed count against `max`: a slice is bounded by what it
/// walks, not only by what it removes.
pub fn purge_under(
    store: &dyn Store,
    p: ProjectId,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
    prefix_of: impl Fn(&Campaign) -> Vec<u8>,
    mut also: impl FnMut(&Campaign, &mut Batch) -> Result<()>,
) -> Result<Slice> {
    let mut batch = Batch::new();
    let mut slice = Slice::default();
    let mut walked = 0;
    for kv in store.scan(&keys::campaigns(p), after, false) {
        let (k, v) = kv?;
        if walked + slice.removed >= max {
            slice.next = Some(k);
            break;
        }
        walked += 1;
        let Ok(c) = Campaign::decode(&v) else {
            continue;
        };
        let ended = matches!(c.status, CampaignStatus::Sent | CampaignStatus::Cancelled);
        if !ended || c.updated_at.millis() >= before {
            continue;
        }
        also(&c, &mut batch)?;
        for key in store
            .scan(&prefix_of(&c), None, false)
            // At least one, so that a slice that resumes at this campaign moves on.
            .take(max.saturating_sub(walked + slice.removed).max(1))
        {
            batch.delete(key?.0);
            slice.removed += 1;
        }
        if walked + slice.removed >= max {
            // This campaign may have keys left: the next slice starts at it again.
            slice.next = Some(prefix_before(&k));
            break;
        }
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(slice)
}

/// A scan bound just below `key`, so a scan "after" it starts at `key` itself.
fn prefix_before(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    match k.last_mut() {
        Some(b) if *b > 0 => {
            *b -= 1;
            k.push(0xff);
        }
        _ => {
            k.pop();
        }
    }
    k
}
