//! The lease table, as the node layer sees it: which nodes are alive, and which node
//! holds each project under which epoch. The PostgreSQL store implements it
//! (`store::postgres::leases`); sled has no cluster (`Store::cluster` is None).
//!
//! Every time is the database's `now()`, never a node's clock, so nodes whose clocks
//! disagree still agree on who holds a lease. A holder's epoch goes up each time the
//! lease changes hands; the store checks it in every commit of the project (fencing),
//! so a node that lost a lease without knowing it cannot write.
//!
//! The futures run on the store's own runtime and can be awaited from any runtime;
//! they own what they need, so a caller can spawn them.

use std::future::Future;
use std::pin::Pin;

use crate::error::Result;
use crate::id::ProjectId;

pub type LeaseFuture<T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'static>>;

/// A node that heartbeats, and how the others reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub url: String,
}

/// The holder of a lease: node id, its advertise URL, and when the lease runs out
/// (milliseconds since the epoch, by the database's clock).
pub type Holder = (String, String, i64);

pub trait Leases: Send + Sync + 'static {
    /// Records that `node_id` is alive now (inserting it on its first beat).
    fn heartbeat(&self, node_id: &str, advertise_url: &str) -> LeaseFuture<()>;

    /// Nodes whose last heartbeat is less than `lease_seconds` old, by id.
    fn live_nodes(&self, lease_seconds: u64) -> LeaseFuture<Vec<Node>>;

    /// Takes the lease of `p` for `lease_seconds` when it is free, expired or already
    /// ours, and answers the epoch held; None when another node holds it. "Ours" is
    /// this process's: a lease of an earlier process with the same `node_id` is taken
    /// at once only when that process is gone, else once it runs out. The epoch goes
    /// up whenever the lease changes hands, to another node or another process (never
    /// when we renew our own).
    fn try_acquire(
        &self,
        p: ProjectId,
        node_id: &str,
        lease_seconds: u64,
    ) -> LeaseFuture<Option<u64>>;

    /// Moves our lease's end to now + `lease_seconds`; false when it is no longer
    /// this process's under `epoch` (taken over after it expired).
    fn renew(
        &self,
        p: ProjectId,
        node_id: &str,
        epoch: u64,
        lease_seconds: u64,
    ) -> LeaseFuture<bool>;

    /// Renews every lease in `held` (project, epoch) in one statement, like `renew`
    /// each; answers the projects whose lease is no longer this process's (lost). One
    /// round trip a tick, however many projects a node holds.
    fn renew_all(
        &self,
        held: Vec<(ProjectId, u64)>,
        node_id: &str,
        lease_seconds: u64,
    ) -> LeaseFuture<Vec<ProjectId>>;

    /// Ends our lease now, so the next owner takes it without waiting for it to run
    /// out. Nothing happens when it is no longer ours under `epoch`.
    fn release(&self, p: ProjectId, node_id: &str, epoch: u64) -> LeaseFuture<()>;

    /// Who holds the lease of `p` (expired or not), when anyone has ever held it. A
    /// holder that never heartbeat (no advertise URL) counts as none.
    fn holder(&self, p: ProjectId) -> LeaseFuture<Option<Holder>>;

    /// The leases held by `node_id` (expired or not), with their epochs.
    fn leases_of(&self, node_id: &str) -> LeaseFuture<Vec<(ProjectId, u64)>>;
}
