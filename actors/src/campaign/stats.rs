//! A campaign's counts, read and written in the batch of what they count (a queued
//! batch, a delivery outcome, an open, an unsubscribe: the last two reach it through
//! `outcomes`, the campaign's hooks on its emails).

use crate::campaign::CampaignStats;
use crate::error::Result;
use crate::model::{CampaignId, ProjectId};
use crate::store::{codec, keys, Batch, Store};

pub fn load(store: &dyn Store, p: ProjectId, c: CampaignId) -> Result<CampaignStats> {
    match store.get(&keys::campaign_stats(p, c))? {
        Some(bytes) => codec::decode(&bytes),
        None => Ok(CampaignStats::default()),
    }
}

/// Changes the stats in `batch`. Call it once per campaign per batch: it reads the
/// stored counts, which do not yet include the batch's own changes.
pub fn update(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: CampaignId,
    change: impl FnOnce(&mut CampaignStats),
) -> Result<CampaignStats> {
    let mut stats = load(store, p, c)?;
    change(&mut stats);
    batch.put(keys::campaign_stats(p, c), codec::encode(&stats)?);
    Ok(stats)
}
