//! A campaign's audience chunks (the contact ids fixed when it started sending) are
//! only read while it sends. Once it ended (SENT or CANCELLED, its `updated_at`) longer
//! ago than `emails_days`, they go; the campaign and its stats stay.

use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{keys, Store};

use super::ended_retention as ended_campaigns;
use crate::store::Slice;

/// Deletes up to `max` audience chunks of campaigns that ended before `before`,
/// walking the campaigns after `after`.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<Slice> {
    ended_campaigns::purge_under(
        store,
        p,
        before,
        after,
        max,
        |c| keys::campaign_audience(p, c.id),
        |_, _| Ok(()),
    )
}

/// Whether any campaign still keeps audience chunks (whether its campaign ended long
/// enough ago is for the slice to judge).
pub fn due(store: &dyn Store, p: ProjectId) -> Result<bool> {
    Ok(store
        .scan(&keys::campaign_audiences(p), None, false)
        .next()
        .transpose()?
        .is_some())
}
