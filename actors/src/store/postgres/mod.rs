//! The PostgreSQL backend (`storage.backend = "postgres"`). The engine reads the store
//! from actor threads and handlers, which must never wait on the network, so the node
//! keeps every pair in memory: a persistent ordered map (`imbl::OrdMap`, cloned in O(1)
//! for each scan and snapshot) holding what PostgreSQL has, loaded at open, under the
//! sled backend's overlay of writes applied but not yet committed.
//!
//! `apply` puts a batch in the overlay (visible at once) and queues its ops. `durable()`
//! waits on the group commit (`store::group_commit`): its flusher thread takes every
//! queued op, folds them to one value per key and writes them as ONE statement, so one
//! transaction and one server-side WAL flush acknowledge every batch applied before it.
//! Once committed, the values move from the overlay into the map.
//!
//! Several nodes share one schema. A node of a cluster (`partial`) holds the global
//! keys and only the projects it owns (`load_project`), and writes a project only under
//! the lease epoch it holds (`set_fence`), checked in the commit's own statement
//! (`fence.rs` says what happens when a fence is found broken).

mod db;
mod fence;
mod guard;
mod leases;
pub mod migrate;
mod schema;
mod tls;
mod view;

use std::collections::{HashMap, VecDeque};
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use self::db::{Bytes, Db, Folded, Group, Map};
use self::fence::Lost;
use super::group_commit::GroupCommit;
use super::keys;
use super::overlay::{until, Merge, Overlay};
use super::{Applied, Batch, Durable, KvIter, KvPair, Op, Store};
use crate::cluster::leases::Leases;
use crate::error::{Error, Result};
use crate::id::ProjectId;

pub use schema::VERSION as SCHEMA_VERSION;
pub use tls::PgTls;

#[derive(Debug, Clone)]
pub struct PostgresConfig {
    /// A libpq-style URL or key=value string; `options=-c search_path=<schema>` puts the
    /// tables in a schema of their own.
    pub url: String,
    pub pool_size: usize,
    /// How long `open` waits for another process's schema migration to finish.
    pub lock_wait_ms: u64,
    /// How long a commit, a lease call or a wait for a pooled connection may take (a
    /// project's load and the migrations are exempt): a hung server or a vanished
    /// connection then fails the call (503 at the edge) instead of hanging it.
    pub statement_timeout_ms: u64,
    /// A node of a cluster: it loads the global keys only, each project when it takes
    /// its lease (`load_project`), and refuses writes to a project it holds no fence
    /// for. False: every pair is loaded and no fence is required (one node, the CLI).
    pub partial: bool,
    /// TLS to the server (`tls.rs`), and extra roots for `VerifyFull`.
    pub tls: PgTls,
    pub ca_file: Option<std::path::PathBuf>,
}

pub struct PostgresStore {
    shared: Arc<Shared>,
    commits: GroupCommit,
    /// Batches applied since the store opened (`Store::batches_applied`).
    batches: crate::metrics::Counter,
}

struct Shared {
    /// What PostgreSQL holds (as far as this node wrote it).
    base: RwLock<Map>,
    /// One lock for the queued ops and the overlay keeps the commit order the order in
    /// which writes became visible.
    pending: Mutex<Pending>,
    /// The overlay version that PostgreSQL has (see `Store::scan_durable`).
    synced: AtomicU64,
    /// One commit at a time: the flusher's, or a `flush_blocking`.
    committing: Mutex<()>,
    /// One `reload_prefix` at a time.
    reloading: Mutex<()>,
    /// While a `reload_prefix` reads: the keys commits moved into the map meanwhile.
    moved_while_reading: Mutex<Option<Vec<Vec<u8>>>>,
    /// PostgreSQL transactions committed (one per group commit that had writes).
    transactions: AtomicU64,
    db: Db,
    partial: bool,
    /// `durable()` calls so far: a waiter's number orders it against the commits.
    registered: AtomicU64,
    /// The last `registered` a successful commit covered: every waiter numbered up to
    /// it had its writes committed.
    covered: AtomicU64,
    /// Writes dropped for a broken fence, so their waiters get an error even when a
    /// later commit succeeds (`fence.rs`).
    lost: Mutex<Vec<Lost>>,
    on_fence_lost: RwLock<Vec<FenceLost>>,
}

/// Commits tried in one flush when each finds another lease taken over.
const SYNC_ATTEMPTS: usize = 4;

/// A hook `Store::on_fence_lost` registered.
type FenceLost = Arc<dyn Fn(ProjectId) + Send + Sync>;

#[derive(Default)]
struct Pending {
    ops: Vec<Op>,
    overlay: Overlay,
    /// The lease epoch held for each project this node writes under a fence.
    fences: HashMap<ProjectId, u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read(m: &RwLock<Map>) -> Map {
    m.read().unwrap_or_else(|p| p.into_inner()).clone()
}

impl PostgresStore {
    /// Waits for the group commit that covers every write applied so far, then fails
    /// when a write this waiter may have made was dropped meanwhile: one of `applied`'s
    /// projects, or any, when the waiter does not say what it wrote (fence.rs).
    fn wait(&self, applied: Option<Applied>) -> Durable {
        let number = self.shared.registered.fetch_add(1, Ordering::SeqCst) + 1;
        let wait = self.commits.wait();
        let shared = self.shared.clone();
        Box::pin(async move {
            let outcome = wait.await;
            if let Some(project) = shared.lost_for(number, applied.as_ref()) {
                return Err(Error::NotOwner { project });
            }
            outcome
        })
    }

    /// Connects, migrates the schema, loads every pair (or, `partial`, the global
    /// keys) and checks the key layout. Other nodes may share the schema.
    pub fn open(config: &PostgresConfig) -> Result<Arc<Self>> {
        let (db, map) = Db::open(config)?;
        let shared = Arc::new(Shared {
            base: RwLock::new(map),
            pending: Mutex::new(Pending::default()),
            synced: AtomicU64::new(0),
            committing: Mutex::new(()),
            reloading: Mutex::new(()),
            moved_while_reading: Mutex::new(None),
            transactions: AtomicU64::new(0),
            db,
            partial: config.partial,
            registered: AtomicU64::new(0),
            covered: AtomicU64::new(0),
            lost: Mutex::new(Vec::new()),
            on_fence_lost: RwLock::new(Vec::new()),
        });
        shared.check_layout()?;
        let flusher = shared.clone();
        let commits = GroupCommit::start(move || flusher.sync());
        Ok(Arc::new(PostgresStore {
            shared,
            commits,
            batches: Default::default(),
        }))
    }
}

impl Shared {
    /// Commits everything applied so far, then moves it from the overlay to the map.
    /// A broken fence drops the writes of its project (`fence.rs`) and the commit is
    /// tried again with the others, so their waiters are not failed for it.
    fn sync(&self) -> Result<()> {
        let _one = lock(&self.committing);
        // Each drop clears a fence, and a write to a project without one is refused at
        // apply, so a retry only meets projects whose lease moved meanwhile.
        for _ in 0..SYNC_ATTEMPTS {
            if self.sync_once()? {
                return Ok(());
            }
        }
        Err(Error::storage(format!(
            "{SYNC_ATTEMPTS} commits in a row found a lease taken over; the writes are queued \
             for the next"
        )))
    }

    /// One commit; false when a project's writes were dropped (the rest are queued again).
    fn sync_once(&self) -> Result<bool> {
        let (ops, upto, registered, fences) = {
            let mut p = lock(&self.pending);
            // Read under the lock that `apply` takes: a waiter counted here applied
            // its writes before, so they are in `ops`.
            let registered = self.registered.load(Ordering::SeqCst);
            (
                std::mem::take(&mut p.ops),
                p.overlay.version(),
                registered,
                p.fences.clone(),
            )
        };
        if ops.is_empty() {
            self.synced.fetch_max(upto, Ordering::AcqRel);
            self.covered.fetch_max(registered, Ordering::AcqRel);
            return Ok(true);
        }
        let mut folded = Folded::new();
        for op in ops {
            match op {
                Op::Put(k, v) => folded.insert(k, Some(v)),
                Op::Delete(k) => folded.insert(k, None),
            };
        }
        let mut group = Group::from(folded);
        let (fenced, unfenced) = fence::of_group(&group, &fences, self.partial);
        group.fences = fenced;
        if !unfenced.is_empty() {
            // Its fence was cleared after the writes were applied: they cannot land.
            self.lose(group, unfenced, false);
            return Ok(false);
        }
        let (group, outcome) = self.db.commit(group);
        let broken = match outcome {
            Ok(broken) => broken,
            Err(e) => {
                self.requeue(group, |_| true);
                return Err(e);
            }
        };
        if !broken.is_empty() {
            self.lose(group, broken, true);
            return Ok(false);
        }
        self.transactions.fetch_add(1, Ordering::Relaxed);
        // The map first, then the overlay: a reader that misses a key in the overlay
        // finds it in the map.
        let mut moved = Vec::with_capacity(group.gone.len() + group.keys.len());
        {
            let mut base = self.base.write().unwrap_or_else(|p| p.into_inner());
            for k in group.gone {
                base.remove(k.as_slice());
                moved.push(k);
            }
            for (k, v) in group.keys.into_iter().zip(group.values) {
                base.insert(Bytes::from(k.as_slice()), Bytes::from(v));
                moved.push(k);
            }
        }
        if let Some(log) = lock(&self.moved_while_reading).as_mut() {
            log.extend(moved.iter().cloned());
        }
        let mut p = lock(&self.pending);
        p.overlay.moved_upto(moved.iter(), upto);
        self.synced.fetch_max(upto, Ordering::AcqRel);
        self.covered.fetch_max(registered, Ordering::AcqRel);
        Ok(true)
    }

    /// Queues the group's writes whose key passes `keep` again, ahead of later writes,
    /// so a later commit has them (their final values are the same ops' net effect).
    fn requeue(&self, group: Group, keep: impl Fn(&[u8]) -> bool) {
        let mut again: Vec<Op> = group
            .gone
            .into_iter()
            .filter(|k| keep(k))
            .map(Op::Delete)
            .collect();
        again.extend(
            group
                .keys
                .into_iter()
                .zip(group.values)
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| Op::Put(k, v)),
        );
        let mut p = lock(&self.pending);
        let later = std::mem::replace(&mut p.ops, again);
        p.ops.extend(later);
    }

    /// A new (empty) store is marked with this version's key layout; a store in another
    /// layout is refused (PostgreSQL stores start at layout 6: nothing to migrate yet).
    fn check_layout(&self) -> Result<()> {
        let (mark, empty) = {
            let base = self.base.read().unwrap_or_else(|p| p.into_inner());
            (
                base.get(keys::FORMAT_KEY).map(|v| v.to_vec()),
                base.is_empty(),
            )
        };
        let at = &self.db.place;
        match mark {
            None if empty => {
                let mut folded = Folded::new();
                folded.insert(
                    keys::FORMAT_KEY.to_vec(),
                    Some(keys::FORMAT.to_be_bytes().to_vec()),
                );
                let (_, outcome) = self.db.commit(Group::from(folded));
                outcome?;
                self.base.write().unwrap_or_else(|p| p.into_inner()).insert(
                    Bytes::from(keys::FORMAT_KEY),
                    Bytes::from(keys::FORMAT.to_be_bytes().as_slice()),
                );
                Ok(())
            }
            None => Err(Error::storage(format!(
                "{at} holds pairs without a key layout mark; point storage.postgres.url at an \
                 empty database or schema"
            ))),
            Some(m) if m.as_slice() == keys::FORMAT.to_be_bytes() => Ok(()),
            Some(m) => Err(Error::storage(format!(
                "{at} is in key layout {m:?} (as bytes), and this version reads layout {} \
                 only; run the version that wrote it",
                keys::FORMAT
            ))),
        }
    }

    /// The map's range under the overlay's entries up to version `synced`.
    fn merged(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        reverse: bool,
        synced: u64,
        in_order: bool,
    ) -> KvIter<'static> {
        let end = super::sled_store::prefix_end(prefix);
        let lower = match (after, reverse) {
            (Some(a), false) => Excluded(a.to_vec()),
            _ => Included(prefix.to_vec()),
        };
        let upper = match (after, reverse, end) {
            (Some(a), true, _) => Excluded(a.to_vec()),
            (_, _, Some(e)) => Excluded(e),
            (_, _, None) => Unbounded,
        };
        // The overlay before the map: a key committed in between is then in both
        // copies (with the same value), never in neither.
        let (overlay, stop) = lock(&self.pending)
            .overlay
            .view(&lower, &upper, reverse, synced, in_order);
        let base = Chunks::new(read(&self.base), lower, upper, reverse);
        Box::new(until(Merge::new(overlay, base, reverse), stop))
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.commits.stop();
    }
}

impl Store for PostgresStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = lock(&self.shared.pending).overlay.get(key) {
            return Ok(v);
        }
        Ok(self
            .shared
            .base
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|v| v.to_vec()))
    }

    fn scan<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>, reverse: bool) -> KvIter<'a> {
        self.shared.merged(prefix, after, reverse, u64::MAX, false)
    }

    fn scan_durable<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        let synced = self.shared.synced.load(Ordering::Acquire);
        self.shared.merged(prefix, after, false, synced, false)
    }

    /// One state, lazily: the overlay is copied first and the map is read from one
    /// clone (an immutable map), so a key committed meanwhile is in both or in the map
    /// with every key committed before it.
    fn scan_durable_in_order<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        let synced = self.shared.synced.load(Ordering::Acquire);
        self.shared.merged(prefix, after, false, synced, true)
    }

    fn batches_applied(&self) -> u64 {
        self.batches.get()
    }

    fn apply(&self, batch: Batch) -> Result<Applied> {
        let ops = batch.into_ops();
        let mut p = lock(&self.shared.pending);
        if self.shared.partial {
            fence::check(&ops, &p.fences)?;
        }
        self.batches.add(1);
        p.ops.extend(ops.iter().cloned());
        let projects = fence::projects(&ops);
        p.overlay.apply(ops);
        Ok(Applied::at(p.overlay.version(), projects))
    }

    fn durable(&self) -> Durable {
        self.wait(None)
    }

    fn durable_after(&self, applied: Applied) -> Durable {
        self.wait(Some(applied))
    }

    fn flush_blocking(&self) -> Result<()> {
        self.shared.sync()
    }

    /// The overlay and the map copied under the lock every write takes: the map may
    /// already have some of the overlay's entries (a commit between its two steps),
    /// always with the same values, so together they are the state at that moment.
    fn snapshot(&self) -> Result<KvIter<'_>> {
        let (overlay, base) = {
            let p = lock(&self.shared.pending);
            (
                p.overlay.range(Unbounded, Unbounded, false),
                read(&self.shared.base),
            )
        };
        let base = Chunks::new(base, Unbounded, Unbounded, false);
        Ok(Box::new(Merge::new(overlay, base, false)))
    }

    fn load_project(&self, p: ProjectId) -> Result<()> {
        self.shared.load_project(p)
    }

    fn unload_project(&self, p: ProjectId) {
        self.shared.unload_project(p)
    }

    fn set_fence(&self, p: ProjectId, epoch: Option<u64>) {
        let mut pending = lock(&self.shared.pending);
        match epoch {
            Some(e) => pending.fences.insert(p, e),
            None => pending.fences.remove(&p),
        };
    }

    fn on_fence_lost(&self, hook: FenceLost) {
        self.shared
            .on_fence_lost
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
    }

    fn reload_prefix(&self, prefix: &[u8]) -> Result<()> {
        self.shared.reload_prefix(prefix)
    }

    fn guard_counts(&self) -> Option<Arc<dyn crate::cluster::guard::GuardCounts>> {
        Some(Arc::new(leases::PgLeases::new(self.shared.clone())))
    }

    fn cluster(&self) -> Option<Arc<dyn Leases>> {
        Some(Arc::new(leases::PgLeases::new(self.shared.clone())))
    }

    fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
        if keys::project_of(key).is_some() {
            return Err(Error::storage(
                "put_if_absent is for global keys (a project's keys are written by its owner)",
            ));
        }
        if let Some(v) = self.get(key)? {
            return Ok(v);
        }
        // Under the commit lock: no commit of this node moves a value of the key into
        // the map between the statement and the map's update.
        let _one = lock(&self.shared.committing);
        let stored = self.shared.db.put_if_absent(key.to_vec(), value.to_vec())?;
        self.shared
            .base
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(Bytes::from(key), Bytes::from(stored.as_slice()));
        Ok(stored)
    }
}

/// Pairs copied out of a clone of the map a chunk at a time, so a long walk holds no
/// lock and copies no more than it reads.
struct Chunks {
    map: Map,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    buf: VecDeque<KvPair>,
    done: bool,
}

const CHUNK: usize = 256;

impl Chunks {
    fn new(map: Map, lower: Bound<Vec<u8>>, upper: Bound<Vec<u8>>, reverse: bool) -> Self {
        Chunks {
            map,
            lower,
            upper,
            reverse,
            buf: VecDeque::new(),
            done: false,
        }
    }

    fn refill(&mut self) {
        let range = self
            .map
            .range::<_, [u8]>((borrowed(&self.lower), borrowed(&self.upper)));
        let copy = |(k, v): (&Bytes, &Bytes)| (k.to_vec(), v.to_vec());
        self.buf = if self.reverse {
            range.rev().take(CHUNK).map(copy).collect()
        } else {
            range.take(CHUNK).map(copy).collect()
        };
        match self.buf.back() {
            Some((last, _)) if self.buf.len() == CHUNK => {
                let next = Excluded(last.clone());
                if self.reverse {
                    self.upper = next;
                } else {
                    self.lower = next;
                }
            }
            _ => self.done = true,
        }
    }
}

fn borrowed(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Included(k) => Included(k.as_slice()),
        Excluded(k) => Excluded(k.as_slice()),
        Unbounded => Unbounded,
    }
}

impl Iterator for Chunks {
    type Item = Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.done {
            self.refill();
        }
        self.buf.pop_front().map(Ok)
    }
}

#[cfg(test)]
mod tests;
