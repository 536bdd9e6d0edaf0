//! The store as one project's actor sees it: every method is the store's, and each
//! `apply` is noted, so that the actor's next wait names the writes it waits for
//! (`Store::durable_after`). Before this, the link from a write to its wait was a
//! thread-local in the PostgreSQL store, shared by every actor on an arbiter's thread.

use std::sync::{Arc, Mutex};

use crate::cluster::guard::GuardCounts;
use crate::cluster::leases::Leases;
use crate::error::Result;
use crate::id::ProjectId;
use crate::store::{Applied, Batch, Durable, KvIter, Store};

pub(crate) struct Recorder {
    store: Arc<dyn Store>,
    /// What was applied through this handle since the last `take`.
    applied: Mutex<Applied>,
}

impl Recorder {
    pub(crate) fn new(store: Arc<dyn Store>) -> Recorder {
        Recorder {
            store,
            applied: Mutex::default(),
        }
    }

    /// What was applied since the last call (nothing: `Applied::default()`).
    pub(crate) fn take(&self) -> Applied {
        std::mem::take(&mut *self.applied.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A wait for the writes applied since the last one.
    pub(crate) fn durable_for_mine(&self) -> Durable {
        self.store.durable_after(self.take())
    }
}

impl Store for Recorder {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.get(key)
    }

    fn scan<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>, reverse: bool) -> KvIter<'a> {
        self.store.scan(prefix, after, reverse)
    }

    fn scan_durable<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        self.store.scan_durable(prefix, after)
    }

    fn scan_durable_in_order<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        self.store.scan_durable_in_order(prefix, after)
    }

    fn apply(&self, batch: Batch) -> Result<Applied> {
        let applied = self.store.apply(batch)?;
        let mut mine = self.applied.lock().unwrap_or_else(|p| p.into_inner());
        *mine = std::mem::take(&mut *mine).and(applied.clone());
        Ok(applied)
    }

    fn batches_applied(&self) -> u64 {
        self.store.batches_applied()
    }

    fn durable(&self) -> Durable {
        self.store.durable()
    }

    fn durable_after(&self, applied: Applied) -> Durable {
        self.store.durable_after(applied)
    }

    fn flush_blocking(&self) -> Result<()> {
        self.store.flush_blocking()
    }

    fn snapshot(&self) -> Result<KvIter<'_>> {
        self.store.snapshot()
    }

    fn load_project(&self, p: ProjectId) -> Result<()> {
        self.store.load_project(p)
    }

    fn unload_project(&self, p: ProjectId) {
        self.store.unload_project(p)
    }

    fn set_fence(&self, p: ProjectId, epoch: Option<u64>) {
        self.store.set_fence(p, epoch)
    }

    fn on_fence_lost(&self, hook: Arc<dyn Fn(ProjectId) + Send + Sync>) {
        self.store.on_fence_lost(hook)
    }

    fn reload_prefix(&self, prefix: &[u8]) -> Result<()> {
        self.store.reload_prefix(prefix)
    }

    fn cluster(&self) -> Option<Arc<dyn Leases>> {
        self.store.cluster()
    }

    fn guard_counts(&self) -> Option<Arc<dyn GuardCounts>> {
        self.store.guard_counts()
    }

    fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
        self.store.put_if_absent(key, value)
    }
}
