//! Storage behind a trait. The engine speaks to an ordered key-value store with atomic
//! batches and a durability barrier; sled is the embedded implementation, PostgreSQL
//! (`postgres`) the shared one, chosen by `storage.backend`.
//!
//! Keys are designed for range scans: `p/<project>/c/<contact id>` holds a contact,
//! `p/<project>/ce/<email>` is the email index, and so on (see `keys`).

pub mod backup;
pub mod blocks;
#[cfg(test)]
pub(crate) mod contract;
mod slice;
pub use crate::codec;
pub use slice::Slice;
pub mod group_commit;
pub mod keys;
pub mod mover;
pub mod overlay;
pub mod paging;
pub mod postgres;
pub mod sled_store;
pub mod wal;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::cluster::leases::Leases;
use crate::error::Result;
use crate::id::ProjectId;

pub use postgres::{PostgresConfig, PostgresStore};
pub use sled_store::{SledConfig, SledStore};

/// Runs store work that may wait on the database (a list, a scan, a read through)
/// off the async threads.
pub(crate) async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        crate::error::Error::Internal(format!("store work off the async threads: {e}"))
    })?
}

pub type KvPair = (Vec<u8>, Vec<u8>);
pub type KvIter<'a> = Box<dyn Iterator<Item = Result<KvPair>> + Send + 'a>;
pub type Durable = Pin<Box<dyn Future<Output = Result<()>> + Send + 'static>>;

/// What `apply` wrote, handed back to `durable_after` by whoever waits for it: the
/// token that ties a write to its wait. A store whose writes can be dropped before
/// they are durable (PostgreSQL, when a lease is lost) fails exactly the waiters whose
/// writes went; `Applied::default()` is "nothing written".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The store's version after the earliest and after the latest apply (the
    /// overlay's; 0 where there is none): a drop between them may have taken a write.
    pub(crate) first: u64,
    pub(crate) version: u64,
    /// The projects the writes touched.
    pub(crate) projects: Vec<ProjectId>,
}

impl Applied {
    /// One write of `version`, to `projects`.
    pub(crate) fn at(version: u64, projects: Vec<ProjectId>) -> Applied {
        Applied {
            first: version,
            version,
            projects,
        }
    }

    /// A wait for whatever was written of `p`, when the writes themselves are not at
    /// hand: any of `p`'s writes dropped meanwhile fails it, another project's does not.
    pub(crate) fn touching(p: ProjectId) -> Applied {
        Applied::at(0, vec![p])
    }

    /// Both writes, to wait for them together (from the earlier to the later version,
    /// every project).
    pub(crate) fn and(mut self, other: Applied) -> Applied {
        self.first = match (self.first, other.first) {
            (0, b) => b,
            (a, 0) => a,
            (a, b) => a.min(b),
        };
        self.version = self.version.max(other.version);
        for p in other.projects {
            if !self.projects.contains(&p) {
                self.projects.push(p);
            }
        }
        self
    }
}

/// One atomic write: all of it is applied, or none of it.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<Op>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Op {
    // As bytes, not as sequences of u8: one copy instead of a call per byte when the
    // log is written and replayed (the bytes on disk are the same).
    Put(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    Delete(#[serde(with = "serde_bytes")] Vec<u8>),
}

impl Batch {
    pub fn new() -> Self {
        Batch::default()
    }

    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(Op::Put(key.into(), value.into()));
    }

    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push(Op::Delete(key.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }
}

pub trait Store: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Pairs whose keys start with `prefix`, in key order or reversed, beginning
    /// strictly after (or, reversed, strictly before) `after` when it is given.
    fn scan<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>, reverse: bool) -> KvIter<'a>;

    /// Like `scan` from the start of `prefix`, but only values that are durable (and no
    /// key deleted since, durably or not). The dispatcher walks the outbox with it, so it
    /// never sends an email that a crash could still take back. A backend whose `apply`
    /// is durable when it returns can keep this default.
    fn scan_durable<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        self.scan(prefix, after, false)
    }

    /// Like `scan_durable`, for a reader that keeps a cursor in key order (the webhook
    /// deliverer walking the event log): what it shows is one state (no key written
    /// after the walk began is shown unless every earlier one is), and it ends at the
    /// first key whose latest write is not durable yet, showing that key's older
    /// durable value if there is one. Plain `scan_durable` goes on past such a key with
    /// an older value than the durable one (a block of the event log rewritten since),
    /// and a cursor moved past its entries. It may end early (sled reads a bounded
    /// number of keys at a time); the caller asks again from the last key it got.
    fn scan_durable_in_order<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        self.scan_durable(prefix, after)
    }

    /// Applies a batch atomically. It is visible at once, and durable once
    /// `durable_after` with the answer (or `durable`) resolves.
    fn apply(&self, batch: Batch) -> Result<Applied>;

    /// Batches applied since the store opened (`/metrics`): one per write message, so
    /// a rate of this against requests shows a write that takes more than one.
    fn batches_applied(&self) -> u64 {
        0
    }

    /// Resolves once every write applied before this call is on disk. Calls made at
    /// about the same time share one flush (group commit). For a caller that does not
    /// know which writes it waits for: any write dropped meanwhile fails it.
    fn durable(&self) -> Durable;

    /// Like `durable`, for the writes `applied` names (the `and` of the caller's
    /// applies since its last wait): a write of another project dropped meanwhile does
    /// not fail it. Stores that drop no write keep this default.
    fn durable_after(&self, _applied: Applied) -> Durable {
        self.durable()
    }

    /// Flushes everything now, blocking the calling thread. For shutdown and the CLI.
    fn flush_blocking(&self) -> Result<()>;

    /// Every pair, in key order, as of one moment: each write applied before the call
    /// is in it and none applied after, however long the walk takes. Writers go on
    /// meanwhile. For backups (`store::backup`).
    fn snapshot(&self) -> Result<KvIter<'_>>;

    // What a node of a cluster needs (PostgreSQL). The defaults are a store that holds
    // every project and is the only writer (sled), for which each of these is nothing.

    /// Reads the project's keys from the database into this node's view, replacing
    /// whatever the node held of it. Blocking (a network round trip): call it from a
    /// blocking thread, never from an actor.
    fn load_project(&self, _p: ProjectId) -> Result<()> {
        Ok(())
    }

    /// Forgets the project's keys from this node's view. Make its writes durable
    /// first: writes of the project still queued are dropped.
    fn unload_project(&self, _p: ProjectId) {}

    /// The lease epoch this node holds for `p` (None: not held). Every commit that
    /// writes keys of `p` checks, in its transaction, that the lease table still says
    /// this node holds `p` under that epoch; a batch for a project without a fence is
    /// refused with `Error::NotOwner` when the store serves only the projects it holds.
    fn set_fence(&self, _p: ProjectId, _epoch: Option<u64>) {}

    /// Called (from the store's committing thread; keep it short) with each project
    /// whose fence a commit found broken: another node took the lease. The project's
    /// queued writes are dropped and its fence cleared before the call.
    fn on_fence_lost(&self, _hook: Arc<dyn Fn(ProjectId) + Send + Sync>) {}

    /// Re-reads the global keys under `prefix` (`projects/`, `keys/`) that other nodes
    /// or the CLI wrote. Blocking, like `load_project`.
    fn reload_prefix(&self, _prefix: &[u8]) -> Result<()> {
        Ok(())
    }

    /// The lease table, for a store shared by several nodes.
    fn cluster(&self) -> Option<Arc<dyn Leases>> {
        None
    }

    /// Failed authentication attempts counted across nodes, for a store shared by
    /// several nodes.
    fn guard_counts(&self) -> Option<Arc<dyn crate::cluster::guard::GuardCounts>> {
        None
    }

    /// Stores `value` at the global `key` unless a value is there, and answers the value
    /// stored: of all the processes racing to create a key (nodes starting at once on a
    /// fresh database), one wins and every one answers its value. Blocking, like
    /// `load_project`. Here (one process owns the store) a look then a write.
    fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
        if let Some(v) = self.get(key)? {
            return Ok(v);
        }
        let mut batch = Batch::new();
        batch.put(key.to_vec(), value.to_vec());
        self.apply(batch)?;
        Ok(value.to_vec())
    }
}

#[cfg(test)]
mod applied {
    use super::Applied;
    use crate::id::ProjectId;

    #[test]
    fn writes_waited_for_together_span_every_version_and_project_between_them() {
        let (p, q) = (ProjectId::new(), ProjectId::new());
        let both = Applied::default()
            .and(Applied::at(5, vec![p]))
            .and(Applied::at(9, vec![q]))
            .and(Applied::at(7, vec![p]));
        assert_eq!((both.first, both.version), (5, 9));
        assert_eq!(both.projects, [p, q]);
        assert_eq!(
            Applied::default().and(Applied::default()),
            Applied::default()
        );
    }
}
