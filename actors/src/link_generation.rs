//! Which generation of its link key a project signs with. `rotate-keys` advances it, so
//! the click and open links of mail sent before stop working (their unsubscribe links
//! keep working a while: see `Links::resolve`). Kept beside the project record rather
//! than in it, so project records written before it read as they are: a project
//! without one is at generation 0, never rotated.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{ProjectId, Timestamp};
use crate::store::{codec, keys, Batch, Store};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkState {
    pub generation: u32,
    /// When the project first rotated (ms): unsubscribe links of the format before
    /// generations, which carry no date, count their validity from then.
    pub first_rotated_at: Option<i64>,
}

pub fn load(store: &dyn Store, project: ProjectId) -> Result<LinkState> {
    match store.get(&keys::link_state(project))? {
        Some(b) => codec::decode(&b),
        None => Ok(LinkState::default()),
    }
}

/// Puts the next generation in `batch`, to be applied with the rotation of the keys.
pub fn advance(
    store: &dyn Store,
    batch: &mut Batch,
    project: ProjectId,
    now: Timestamp,
) -> Result<LinkState> {
    let was = load(store, project)?;
    let next = LinkState {
        generation: was.generation.saturating_add(1),
        first_rotated_at: was.first_rotated_at.or(Some(now.millis())),
    };
    batch.put(keys::link_state(project), codec::encode(&next)?);
    Ok(next)
}
