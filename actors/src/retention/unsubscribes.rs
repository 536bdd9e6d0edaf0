//! A campaign's unsubscribe markers (one per contact who left through its link) make
//! `stats.unsubscribed` count each contact once, and let the resubscribe button take
//! that count back. They are one key per unsubscribe, so they would grow for ever.
//! Once the campaign ended (SENT or CANCELLED, its `updated_at`) longer ago than
//! `emails_days`, its count is closed: the markers go, and a closing mark (one key per
//! campaign) says that later unsubscribes through its old links still unsubscribe the
//! contact but no longer change the campaign's stats, so none is counted twice.

use crate::campaign::{Campaign, CampaignStatus};
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{keys, Batch, Store};

use super::emails::Slice;

/// Closes the unsubscribe counts of campaigns that ended before `before` and deletes
/// their markers, walking at most `max` campaigns and markers after `after`.
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
        let closed = keys::campaign_unsubscribes_closed(p, c.id);
        if store.get(&closed)?.is_none() {
            batch.put(closed, Vec::new());
        }
        let markers = store
            .scan(&keys::campaign_unsubscribes(p, c.id), None, false)
            // At least one, so that a slice that resumes at this campaign moves on.
            .take(max.saturating_sub(walked + slice.removed).max(1));
        for marker in markers {
            batch.delete(marker?.0);
            slice.removed += 1;
        }
        if walked + slice.removed >= max {
            // This campaign may have markers left: the next slice starts at it again.
            slice.next = Some(super::audiences::prefix_before(&k));
            break;
        }
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(slice)
}
