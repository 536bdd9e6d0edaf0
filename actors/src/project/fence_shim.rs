//! TEMPORARY, until the store's cluster methods land (branch c-store): no-op stand-ins
//! for `Store::set_fence`, `load_project`, `unload_project` and `on_fence_lost`, so the
//! engine builds and its tests run on sled meanwhile. Deleted at the merge.

use std::sync::Arc;

use crate::error::Result;
use crate::model::ProjectId;
use crate::store::Store;

pub(crate) trait Fencing {
    fn set_fence(&self, _p: ProjectId, _epoch: Option<u64>) {}
    fn load_project(&self, _p: ProjectId) -> Result<()> {
        Ok(())
    }
    fn unload_project(&self, _p: ProjectId) {}
    fn on_fence_lost(&self, _hook: Arc<dyn Fn(ProjectId) + Send + Sync>) {}
}

impl Fencing for dyn Store {}
