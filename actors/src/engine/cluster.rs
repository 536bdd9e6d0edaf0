//! What a node of a cluster needs of the engine: which projects it owns, and taking
//! one over or letting it go as its lease comes and goes. The leases themselves are
//! the store's (`Store::cluster`).

pub use crate::cluster::guard::GuardCounts;
pub use crate::cluster::leases::{Holder, Leases, Node};
pub use crate::cluster::ownership::Ownership;

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::model::ProjectId;
use crate::project::Registry;

/// `engine.handover()`: owned, for a node's background tasks.
#[derive(Clone)]
pub struct Handover(pub(super) Registry);

impl Handover {
    /// The projects this engine serves now.
    pub fn ownership(&self) -> &Arc<Ownership> {
        self.0.ownership()
    }

    /// Takes project `p` over under lease `epoch`, valid for `valid_for`: its actor
    /// starts, and its timers, campaigns and erasures resume.
    pub async fn acquire(&self, p: ProjectId, epoch: u64, valid_for: Duration) -> Result<()> {
        self.0.acquire(p, epoch, valid_for).await
    }

    /// The lease was renewed; false when the project is not held.
    pub fn renew(&self, p: ProjectId, valid_for: Duration) -> bool {
        self.0.renew(p, valid_for)
    }

    /// Lets project `p` go: its work stops and its writes are durable when this answers.
    pub async fn release(&self, p: ProjectId) -> Result<()> {
        self.0.release(p).await
    }
}
