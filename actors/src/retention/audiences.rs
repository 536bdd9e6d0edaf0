//! A campaign's audience chunks (the contact ids fixed when it started sending) are
//! only read while it sends. Once it ended (SENT or CANCELLED, its `updated_at`) longer
//! ago than `emails_days`, they go; the campaign and its stats stay.

use crate::campaign::{Campaign, CampaignStatus};
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{keys, Batch, Store};

use super::emails::Slice;

/// Deletes up to `max` audience chunks of campaigns that ended before `before`,
/// walking the campaigns after `after`.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<Slice> {
    let prefix = keys::campaigns(p);
    let mut batch = Batch::new();
    let mut slice = Slice::default();
    // Every campaign read and every chunk removed count against `max`: a slice is
    // bounded by what it walks, not only by what it removes.
    let mut walked = 0;
    for kv in store.scan(&prefix, after, false) {
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
        for chunk in store
            .scan(&keys::campaign_audience(p, c.id), None, false)
            // At least one, so that a slice that resumes at this campaign moves on.
            .take(max.saturating_sub(walked + slice.removed).max(1))
        {
            batch.delete(chunk?.0);
            slice.removed += 1;
        }
        if walked + slice.removed >= max {
            // This campaign may have chunks left: the next slice starts at it again.
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
pub(super) fn prefix_before(key: &[u8]) -> Vec<u8> {
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
