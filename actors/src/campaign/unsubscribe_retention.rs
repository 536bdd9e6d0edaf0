//! A campaign's unsubscribe markers (one per contact who left through its link) make
//! `stats.unsubscribed` count each contact once, and let the resubscribe button take
//! that count back. They are one key per unsubscribe, so they would grow for ever.
//! Once the campaign ended (SENT or CANCELLED, its `updated_at`) longer ago than
//! `emails_days`, its count is closed: the markers go, and a closing mark (one key per
//! campaign) says that later unsubscribes through its old links still unsubscribe the
//! contact but no longer change the campaign's stats, so none is counted twice.

use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{keys, Store};

use super::ended_retention as ended_campaigns;
use crate::store::Slice;

/// Closes the unsubscribe counts of campaigns that ended before `before` and deletes
/// their markers, walking at most `max` campaigns and markers after `after`.
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
        |c| keys::campaign_unsubscribes(p, c.id),
        |c, batch| {
            let closed = keys::campaign_unsubscribes_closed(p, c.id);
            if store.get(&closed)?.is_none() {
                batch.put(closed, Vec::new());
            }
            Ok(())
        },
    )
}

/// Whether the project has any campaign unsubscribe marker (an ended campaign's may go).
pub fn due(store: &dyn Store, p: ProjectId) -> Result<bool> {
    let prefix = keys::campaign_unsubscribed_all(p);
    Ok(store
        .scan(&prefix, None, false)
        .next()
        .transpose()?
        .is_some())
}
