//! A deleted contact's erasure, campaign phase: its unsubscribe marker in every
//! campaign goes (the campaign's counts stay).

use crate::contact::erasure_record::{walk, Erasure, Step};
use crate::error::Result;
use crate::model::{ContactId, ProjectId};
use crate::store::{keys, Batch, Store};

pub fn unsubscribes(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let prefix = keys::campaigns(p);
    walk(store, &prefix, erasure, left, |k, _| {
        if let Some(id) = keys::id_after(k, &prefix) {
            batch.delete(keys::campaign_unsubscribed(p, id, c));
        }
        Ok(())
    })
}
