//! When a SENDING campaign becomes SENT: once every recipient is queued (or skipped)
//! and none of its emails waits in the outbox. The delivery outcome that empties the
//! campaign's queue (`email::sending::record`, through `outcomes`) ends it in the same
//! batch, so a crash cannot keep the count and the status apart.

use crate::campaign::{Campaign, CampaignStats, CampaignStatus};
use crate::error::Result;
use crate::model::{CampaignId, ProjectId, Timestamp};
use crate::project::counters::add_to_counter;
use crate::store::{keys, Batch, Store};

/// Campaigns not yet SENT or CANCELLED: what `limits.max_campaigns` bounds, so a
/// project that has sent many campaigns can still make new ones.
pub const OPEN_COUNTER: &str = "campaigns-open";

/// Whether the campaign has queued everyone and its outbox is empty.
pub fn drained(c: &Campaign, stats: &CampaignStats) -> bool {
    c.status == CampaignStatus::Sending
        && c.progress.audience_fixed
        && c.progress.cursor >= c.progress.total
        && stats.queued == 0
}

/// Marks the campaign SENT, in `batch` (the caller writes the record).
pub fn finish(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: &mut Campaign,
    now: Timestamp,
) -> Result<()> {
    c.status = CampaignStatus::Sent;
    c.sent_at = Some(now);
    c.updated_at = now;
    batch.delete(keys::sending_campaign(p, c.id));
    tracing::info!(project = %p, campaign = %c.id, recipients = c.progress.total,
        "campaign sent: no email of it waits in the outbox");
    add_to_counter(store, batch, p, OPEN_COUNTER, -1)
}

/// After an outcome that left `stats` (the campaign's counts with it): ends the
/// campaign when that was its last email waiting, in `batch`.
pub fn after_outcome(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    id: CampaignId,
    stats: &CampaignStats,
    now: Timestamp,
) -> Result<()> {
    if stats.queued > 0 {
        return Ok(());
    }
    let Some(bytes) = store.get(&keys::campaign(p, id))? else {
        return Ok(());
    };
    let mut c = Campaign::decode(&bytes)?;
    if drained(&c, stats) {
        finish(store, batch, p, &mut c, now)?;
        batch.put(keys::campaign(p, id), c.encode()?);
    }
    Ok(())
}
