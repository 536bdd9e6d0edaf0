//! The embedded store: one sled tree, made durable by a write-ahead log (see `wal`) with
//! group-committed syncs. Layout under `storage.path`: `db/` (sled) and `wal/`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::group_commit::GroupCommit;
use super::keys;
use super::mover::{Mover, Target};
use super::overlay::{until, Merge, Overlay};
use super::wal::{self, WalFile};
use super::{Applied, Batch, Durable, KvIter, KvPair, Op, Store};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy)]
pub struct SledConfig {
    pub cache_capacity_bytes: u64,
    /// When the current log file passes this size, sled is flushed and the file dropped.
    pub wal_checkpoint_bytes: u64,
    /// How long synced writes gather before they move into sled as one batch.
    pub move_interval_ms: u64,
}

/// A bare number is the cache capacity, with the default checkpoint size.
impl From<u64> for SledConfig {
    fn from(cache_capacity_bytes: u64) -> Self {
        SledConfig {
            cache_capacity_bytes,
            ..SledConfig::default()
        }
    }
}

impl Default for SledConfig {
    fn default() -> Self {
        SledConfig {
            cache_capacity_bytes: 64 << 20,
            wal_checkpoint_bytes: 64 << 20,
            move_interval_ms: 10,
        }
    }
}

pub struct SledStore {
    db: sled::Db,
    log: Arc<Log>,
    commits: GroupCommit,
    mover: Arc<Mover>,
    mover_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Batches applied since it opened (`/metrics`), this store's own.
    batches: crate::metrics::Counter,
}

/// The log side: the writes not yet in the log file (as log bytes, and as ops for the
/// mover), the overlay that serves them until sled has them, and the file.
struct Log {
    db: sled::Db,
    /// One lock for the log bytes, the ops and the overlay keeps the log in the order
    /// the writes became visible.
    pending: Mutex<Pending>,
    file: Mutex<WalFile>,
    mover: Arc<Mover>,
    checkpointing: Arc<AtomicBool>,
    checkpoint_bytes: u64,
    /// Checkpointed log files kept for reuse as later ones (see `wal`).
    spares: Arc<Mutex<Vec<PathBuf>>>,
    /// The overlay version that the log on disk reaches (see `Store::scan_durable`).
    synced: AtomicU64,
    /// Set when the store closes, so a checkpoint that keeps failing stops retrying.
    closing: Arc<AtomicBool>,
}

/// Spare log files kept: one is taken at each rotation and one returned at each
/// checkpoint, so two cover a checkpoint that finishes after the next rotation.
const MAX_SPARES: usize = 2;

/// Keeps a retired log file as a spare while there is room, else removes it.
fn retire(spares: &Mutex<Vec<PathBuf>>, old: &Path) {
    let mut spares = lock(spares);
    if let Some(spare) = wal::retire(old, spares.len() < MAX_SPARES) {
        spares.push(spare);
    }
}

#[derive(Default)]
struct Pending {
    log: Vec<u8>,
    ops: Vec<Op>,
    overlay: Overlay,
}

/// The most keys one `scan_durable_in_order` reads (the caller asks again from the
/// last one for more): 256 blocks of the event log hold 1,024 events, twice what a
/// delivery round walks.
const IN_ORDER_MAX: usize = 256;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Log {
    /// Writes and syncs everything applied so far, then hands it to the mover; rolls
    /// the file at the checkpoint size.
    fn sync(&self) -> Result<()> {
        let mut file = lock(&self.file);
        let (mut data, ops, upto) = {
            let mut p = lock(&self.pending);
            let upto = p.overlay.version();
            (std::mem::take(&mut p.log), std::mem::take(&mut p.ops), upto)
        };
        if let Err(e) = file.append_sync(&mut data) {
            // Put everything back so a later sync writes it, in order.
            let mut p = lock(&self.pending);
            let rest = std::mem::replace(&mut p.log, data);
            p.log.extend_from_slice(&rest);
            let later = std::mem::replace(&mut p.ops, ops);
            p.ops.extend(later);
            return Err(e);
        }
        self.synced.store(upto, Ordering::Release);
        self.mover.push(ops, upto);
        if file.bytes() >= self.checkpoint_bytes && !self.checkpointing.swap(true, Ordering::AcqRel)
        {
            let spare = lock(&self.spares).pop();
            match file.rotate(spare) {
                Ok(old) => self.mover.checkpoint_after(old, upto),
                Err(e) => {
                    // The records are durable either way: keep writing this file and
                    // try again at the next sync.
                    tracing::error!(error = %e, "rolling the write-ahead log failed");
                    self.checkpointing.store(false, Ordering::Release);
                }
            }
        }
        Ok(())
    }
}

impl Target for Log {
    fn apply(&self, folded: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, upto: u64) -> Result<()> {
        let mut batch = sled::Batch::default();
        for (k, v) in folded {
            match v {
                Some(v) => batch.insert(k.as_slice(), v.as_slice()),
                None => batch.remove(k.as_slice()),
            }
        }
        self.db.apply_batch(batch)?;
        lock(&self.pending).overlay.moved_upto(folded.keys(), upto);
        collect_garbage();
        Ok(())
    }

    fn abandon_checkpoint(&self) {
        self.checkpointing.store(false, Ordering::Release);
    }

    /// Every record in the old file is in sled by now, so once sled is flushed the file
    /// is no longer needed. Off the mover's thread, so moves continue meanwhile.
    fn checkpoint(&self, old: PathBuf) {
        let (db, flag, spares, closing) = (
            self.db.clone(),
            self.checkpointing.clone(),
            self.spares.clone(),
            self.closing.clone(),
        );
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            // A failed flush is tried again, backing off, until it works: giving up would
            // keep this log file (and every later one, since no other checkpoint starts
            // while this one runs) growing for the rest of the run.
            let mut backoff = Duration::from_millis(100);
            loop {
                match db.flush() {
                    Ok(_) => {
                        retire(&spares, &old);
                        tracing::info!(
                            millis = started.elapsed().as_millis() as u64,
                            "store checkpoint done"
                        );
                        break;
                    }
                    Err(e) if !closing.load(Ordering::Acquire) => {
                        tracing::error!(error = %e, retry_ms = backoff.as_millis() as u64, "store checkpoint failed; the log file is kept and the checkpoint retried");
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(10));
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "store checkpoint failed at close; the log file is kept for replay");
                        break;
                    }
                }
            }
            // Release the handle before saying we are done, so a drop can reopen.
            drop(db);
            flag.store(false, Ordering::Release);
        });
    }
}

impl SledStore {
    /// Opens (or creates) the store and replays the log of an earlier run. A directory
    /// held by another process gives `Error::Locked` rather than a panic. A directory in
    /// an older key layout is refused: `upgrade::open` migrates it.
    pub fn open(path: &Path, config: impl Into<SledConfig>) -> Result<Arc<Self>> {
        let (store, layout) = Self::open_any_layout(path, config)?;
        if layout != keys::FORMAT {
            return Err(Error::storage(format!(
                "{} is in key layout {layout} and must be upgraded to layout {} first \
                 (any mailroom command does it: start the server on it)",
                path.display(),
                keys::FORMAT
            )));
        }
        Ok(store)
    }

    /// Like `open`, but also opens a directory in an older layout that `upgrade` has
    /// migrations from; answers the layout found, for `upgrade` to bring up to date.
    pub fn open_any_layout(path: &Path, config: impl Into<SledConfig>) -> Result<(Arc<Self>, u32)> {
        let config = config.into();
        let db = open_db(path, &config)?;
        Self::from_db(path, config, db)
    }

    /// The store around a sled database already open: its log replayed, its mover
    /// started. `create_from` hands its own handle here, because sled releases its lock
    /// on the directory only once its background threads let go of a dropped handle,
    /// and a second open right after the first one's drop could find it still held.
    fn from_db(path: &Path, config: SledConfig, db: sled::Db) -> Result<(Arc<Self>, u32)> {
        let wal_dir = path.join("wal");
        let files = wal::existing(&wal_dir)?;
        let spares = Arc::new(Mutex::new(Vec::new()));
        // A new file's seq must be above every seq a spare's records carry, or replay
        // could take a recycled file's old records for new ones.
        let mut last_seq = files.last().map_or(0, |(seq, _)| *seq);
        for (seq, spare) in wal::spares(&wal_dir) {
            last_seq = last_seq.max(seq);
            let mut kept = lock(&spares);
            if kept.len() < MAX_SPARES {
                kept.push(spare);
            } else {
                let _ = std::fs::remove_file(&spare);
            }
        }
        // Later records win per key, so the whole log folds into one final value per key
        // and goes into sled as one batch: one IO-buffer roll instead of two per record.
        let started = std::time::Instant::now();
        let mut replayed = 0usize;
        let mut folded = Overlay::default();
        for (seq, file) in &files {
            for ops in wal::read_records(file, *seq)? {
                folded.apply(ops);
                replayed += 1;
            }
        }
        let layout = check_format(&db, &folded, replayed, path)?;
        if !files.is_empty() {
            let mut batch = sled::Batch::default();
            for (k, _, v) in folded.snapshot() {
                match v {
                    Some(v) => batch.insert(k, v),
                    None => batch.remove(k),
                }
            }
            db.apply_batch(batch)?;
            db.flush()?;
            for (_, file) in &files {
                retire(&spares, file);
            }
            tracing::info!(
                records = replayed,
                files = files.len(),
                millis = started.elapsed().as_millis() as u64,
                "replayed the write-ahead log"
            );
        }
        let next_seq = last_seq + 1;
        let mover = Mover::new(Duration::from_millis(config.move_interval_ms));
        let first_spare = lock(&spares).pop();
        let log = Arc::new(Log {
            db: db.clone(),
            pending: Mutex::new(Pending::default()),
            file: Mutex::new(WalFile::create(&wal_dir, next_seq, first_spare)?),
            mover: mover.clone(),
            checkpointing: Arc::new(AtomicBool::new(false)),
            checkpoint_bytes: config.wal_checkpoint_bytes,
            spares,
            synced: AtomicU64::new(0),
            closing: Arc::new(AtomicBool::new(false)),
        });
        let (m, target) = (mover.clone(), log.clone());
        let mover_thread = std::thread::Builder::new()
            .name("store-mover".into())
            .spawn(move || m.run(&*target))
            .map_err(|e| Error::storage(format!("starting the store mover: {e}")))?;
        let flusher = log.clone();
        let commits = GroupCommit::start(move || flusher.sync());
        let store = Arc::new(SledStore {
            db,
            log,
            commits,
            mover,
            mover_thread: Mutex::new(Some(mover_thread)),
            batches: Default::default(),
        });
        Ok((store, layout))
    }
}

impl SledStore {
    /// Makes a store in the new directory `path` from `pairs` (a restore): straight into
    /// sled, which is flushed at the end, so the first start has no log to replay.
    /// Returns the number of pairs. Pairs without a layout mark are marked `layout`.
    pub fn create_from(
        path: &Path,
        config: SledConfig,
        layout: u32,
        pairs: impl Iterator<Item = Result<super::KvPair>>,
    ) -> Result<(u64, Arc<Self>, u32)> {
        const PAIRS_PER_BATCH: u64 = 10_000;
        let db = open_db(path, &config)?;
        let mut batch = sled::Batch::default();
        let mut n = 0u64;
        for kv in pairs {
            let (k, v) = kv?;
            batch.insert(k, v);
            n += 1;
            if n.is_multiple_of(PAIRS_PER_BATCH) {
                db.apply_batch(std::mem::take(&mut batch))?;
            }
        }
        db.apply_batch(batch)?;
        if db.get(keys::FORMAT_KEY)?.is_none() {
            db.insert(keys::FORMAT_KEY, &layout.to_be_bytes())?;
        }
        db.flush()?;
        let (store, layout) = Self::from_db(path, config, db)?;
        Ok((n, store, layout))
    }
}

/// Opens (or makes) the sled database of the data directory `path`.
fn open_db(path: &Path, config: &SledConfig) -> Result<sled::Db> {
    sled::Config::new()
        .path(path.join("db"))
        .cache_capacity(config.cache_capacity_bytes)
        // Durability comes from the write-ahead log; sled's own periodic flush would
        // only add background IO (it is flushed at checkpoints and at shutdown).
        .flush_every_ms(None)
        .mode(sled::Mode::HighThroughput)
        .open()
        .map_err(|e| match e {
            sled::Error::Io(ref io) if io.to_string().contains("lock") => Error::Locked {
                path: path.display().to_string(),
            },
            other => Error::storage_caused(format!("opening {}", path.display()), other),
        })
}

/// The key layout of the directory (the log's mark, if it wrote one, else sled's). A
/// new store is marked with this version's layout. A layout this version cannot read
/// or migrate is refused with what to do, rather than read as garbage.
fn check_format(db: &sled::Db, log: &Overlay, log_records: usize, path: &Path) -> Result<u32> {
    let mark = match log.get(keys::FORMAT_KEY) {
        Some(v) => v,
        None => db.get(keys::FORMAT_KEY)?.map(|v| v.to_vec()),
    };
    let dir = path.display();
    let current = keys::FORMAT;
    let Some(mark) = mark else {
        if db.is_empty() && log_records == 0 {
            db.insert(keys::FORMAT_KEY, &current.to_be_bytes())?;
            db.flush()?;
            return Ok(current);
        }
        return Err(Error::storage(format!(
            "{dir} holds data without a key layout mark (written by a Mailroom older than \
             layout {}, the oldest this version upgrades); start with an empty data \
             directory (move this one away)",
            keys::OLDEST_UPGRADABLE
        )));
    };
    let layout = <[u8; 4]>::try_from(mark.as_slice())
        .map(u32::from_be_bytes)
        .map_err(|_| Error::storage(format!("{dir} has a damaged key layout mark {mark:?}")))?;
    match layout {
        l if l == current => Ok(l),
        l if l > current => Err(Error::storage(format!(
            "{dir} was written by a newer Mailroom (key layout {l}; this version reads up to \
             {current}); run that version, or restore a backup made before the upgrade"
        ))),
        l if l < keys::OLDEST_UPGRADABLE => Err(Error::storage(format!(
            "{dir} is in key layout {l}, older than the oldest this version upgrades ({}); \
             export its projects with the version that wrote it (mailroom project export), \
             or start with an empty data directory (move this one away)",
            keys::OLDEST_UPGRADABLE
        ))),
        l => Ok(l),
    }
}

impl Drop for SledStore {
    /// Waits for the flusher and any checkpoint, so that the directory is released when
    /// the store is dropped.
    fn drop(&mut self) {
        self.log.closing.store(true, Ordering::Release);
        self.commits.stop();
        self.mover.stop();
        if let Some(t) = lock(&self.mover_thread).take() {
            let _ = t.join();
        }
        while self.log.checkpointing.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl SledStore {
    /// sled's range under the overlay's entries up to version `synced`.
    fn merged<'a>(
        &'a self,
        prefix: &[u8],
        after: Option<&[u8]>,
        reverse: bool,
        synced: u64,
        in_order: bool,
    ) -> KvIter<'a> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let start = prefix.to_vec();
        let end = prefix_end(prefix);
        let lower = match (after, reverse) {
            (Some(a), false) => Excluded(a.to_vec()),
            _ => Included(start),
        };
        let upper = match (after, reverse, end) {
            (Some(a), true, _) => Excluded(a.to_vec()),
            (_, _, Some(e)) => Excluded(e),
            (_, _, None) => Unbounded,
        };
        let (overlay, stop) = lock(&self.log.pending)
            .overlay
            .view(&lower, &upper, reverse, synced, in_order);
        let range = self.db.range::<Vec<u8>, _>((lower, upper));
        let map = |r: sled::Result<(sled::IVec, sled::IVec)>| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(Error::from)
        };
        if reverse {
            Box::new(Merge::new(overlay, range.rev().map(map), true))
        } else {
            Box::new(until(Merge::new(overlay, range.map(map), false), stop))
        }
    }
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // The overlay first: a key leaves it only after sled has its value.
        if let Some(v) = lock(&self.log.pending).overlay.get(key) {
            return Ok(v);
        }
        Ok(self.db.get(key)?.map(|v| v.to_vec()))
    }

    fn scan<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>, reverse: bool) -> KvIter<'a> {
        self.merged(prefix, after, reverse, u64::MAX, false)
    }

    fn scan_durable<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        let synced = self.log.synced.load(Ordering::Acquire);
        self.merged(prefix, after, false, synced, false)
    }

    /// Read whole while the mover is held: a sled iterator is no snapshot, and one
    /// that went on while the mover put a batch into sled could miss a key inserted
    /// behind it (in the leaf it had read) and see a later one (a new leaf): the webhook
    /// deliverer then passed two events it never saw. With the mover held, sled is the
    /// log's prefix it had reached and the overlay holds everything after it, so the
    /// two are one state. At most `IN_ORDER_MAX` keys, so the hold stays short.
    fn scan_durable_in_order<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>) -> KvIter<'a> {
        let held = self.mover.freeze();
        let synced = self.log.synced.load(Ordering::Acquire);
        let read: Vec<Result<KvPair>> = self
            .merged(prefix, after, false, synced, true)
            .take(IN_ORDER_MAX)
            .collect();
        drop(held);
        Box::new(read.into_iter())
    }

    fn batches_applied(&self) -> u64 {
        self.batches.get()
    }

    fn apply(&self, batch: Batch) -> Result<Applied> {
        self.batches.add(1);
        let ops = batch.into_ops();
        let mut record = Vec::new();
        wal::encode_record(&ops, &mut record)?;
        let mut pending = lock(&self.log.pending);
        pending.log.extend_from_slice(&record);
        pending.ops.extend(ops.iter().cloned());
        pending.overlay.apply(ops);
        Ok(Applied::default())
    }

    fn durable(&self) -> Durable {
        Box::pin(self.commits.wait())
    }

    fn flush_blocking(&self) -> Result<()> {
        self.log.sync()?;
        self.mover.move_now(&*self.log)?;
        self.db.flush()?;
        Ok(())
    }

    /// Only the mover writes to sled, so with it frozen sled is the state at some
    /// version M of the overlay and stays so. The overlay, copied once under the lock
    /// every write takes, holds the latest value of every key written after M (a key
    /// leaves it only when a move puts it in sled). Together they are the state at the
    /// moment of the copy. Writes go on into the log and the overlay; the mover catches
    /// up when the walk ends.
    fn snapshot(&self) -> Result<KvIter<'_>> {
        use std::ops::Bound::Unbounded;
        let freeze = self.mover.freeze();
        let overlay = lock(&self.log.pending)
            .overlay
            .range(Unbounded, Unbounded, false);
        let base = self.db.iter().map(|r| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(Error::from)
        });
        Ok(Box::new(Frozen {
            inner: Merge::new(overlay, base, false),
            _freeze: freeze,
        }))
    }
}

/// A walk that keeps sled still until it is dropped.
struct Frozen<I> {
    inner: I,
    _freeze: super::mover::Freeze,
}

impl<I: Iterator> Iterator for Frozen<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

/// Frees the pages sled replaced. sled hands them to crossbeam-epoch's global
/// collector, which frees a few bags of garbage on every 128th pin of any thread. Our
/// reads mostly come from memory now (the overlay, the contact table, remembered keys),
/// so few threads pin and garbage piled up faster than it was freed: measured, RSS grew
/// ~35 MB/s under /v1/track. The mover makes the garbage, so it drives the collection:
/// each flush moves this thread's deferred frees to the global queue and frees up to
/// eight bags; the bound keeps one call short.
fn collect_garbage() {
    for _ in 0..GARBAGE_FLUSHES_PER_MOVE {
        crossbeam_epoch::pin().flush();
    }
}

const GARBAGE_FLUSHES_PER_MOVE: usize = 64;

/// The smallest key greater than every key that starts with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> Arc<SledStore> {
        SledStore::open(dir, SledConfig::default()).unwrap()
    }

    use crate::store::contract::keys;

    #[tokio::test]
    async fn a_durable_scan_shows_values_once_synced_and_hides_deletions_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        crate::store::contract::a_durable_scan_shows_values_once_durable_and_hides_deletions_at_once(&*s)
            .await;
    }

    #[tokio::test]
    async fn durable_scans_never_show_an_older_copy_of_a_key_rewritten_since() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        crate::store::contract::an_in_order_durable_scan_stops_at_a_key_rewritten_since(&*s).await;
        crate::store::contract::a_durable_scan_hides_a_key_rewritten_since(&*s).await;
    }

    #[tokio::test]
    async fn scan_walks_a_prefix_both_ways_from_a_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let mut b = Batch::new();
        for k in ["a/1", "a/2", "a/3", "b/1"] {
            b.put(k.as_bytes(), b"v".to_vec());
        }
        s.apply(b).unwrap();
        s.durable().await.unwrap();
        assert_eq!(keys(s.scan(b"a/", None, false)), ["a/1", "a/2", "a/3"]);
        assert_eq!(keys(s.scan(b"a/", None, true)), ["a/3", "a/2", "a/1"]);
        assert_eq!(keys(s.scan(b"a/", Some(b"a/2"), true)), ["a/1"]);
        assert_eq!(keys(s.scan(b"a/", Some(b"a/2"), false)), ["a/3"]);
    }

    #[tokio::test]
    async fn synced_writes_move_into_sled_and_leave_the_overlay() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let mut b = Batch::new();
        b.put(b"k".to_vec(), b"v1".to_vec());
        s.apply(b).unwrap();
        assert_eq!(s.db.get(b"k").unwrap(), None, "not in sled before its sync");
        s.durable().await.unwrap();
        let moved = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            s.db.get(b"k").unwrap().is_some() && lock(&s.log.pending).overlay.is_empty()
        });
        assert!(moved, "the mover put the synced write into sled");
        assert_eq!(s.get(b"k").unwrap(), Some(b"v1".to_vec()));
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_refused_as_locked() {
        let dir = tempfile::tempdir().unwrap();
        let _s = store(dir.path());
        match SledStore::open(dir.path(), SledConfig::default()) {
            Err(Error::Locked { .. }) => {}
            Err(other) => panic!("expected Locked, got {other:?}"),
            Ok(_) => panic!("expected Locked, got a second handle"),
        }
    }

    #[test]
    fn a_store_in_an_older_key_layout_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        {
            let old = sled::open(dir.path().join("db")).unwrap();
            old.insert(b"p/0190-text-key/c/x", b"v".as_slice()).unwrap();
            old.flush().unwrap();
        }
        match SledStore::open(dir.path(), SledConfig::default()) {
            Err(Error::Storage(m)) => assert!(m.context.contains("empty data directory"), "{m}"),
            Err(other) => panic!("expected a layout error, got {other:?}"),
            Ok(_) => panic!("an unmarked store with data was opened"),
        }
    }

    #[test]
    fn a_new_store_is_marked_and_opens_again() {
        let dir = tempfile::tempdir().unwrap();
        drop(store(dir.path()));
        let reopened = store(dir.path());
        let mark = reopened.db.get(keys::FORMAT_KEY).unwrap().unwrap();
        assert_eq!(mark.as_ref(), keys::FORMAT.to_be_bytes());
    }

    #[tokio::test]
    async fn durable_writes_come_back_from_the_log_when_sled_was_never_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        // A child copy of the directory taken right after `durable()` stands in for a
        // crash: sled's own files there may lack the write, the log has it.
        {
            let s = store(&path);
            let mut b = Batch::new();
            b.put(b"k".to_vec(), b"v1".to_vec());
            b.delete(b"gone".to_vec());
            s.apply(b).unwrap();
            s.durable().await.unwrap();
            copy_dir(&path, &dir.path().join("crash"));
        }
        let s = store(&dir.path().join("crash"));
        assert_eq!(s.get(b"k").unwrap(), Some(b"v1".to_vec()));
    }

    #[tokio::test]
    async fn a_checkpoint_rolls_the_log_and_keeps_every_write() {
        let dir = tempfile::tempdir().unwrap();
        write_through_checkpoints(dir.path(), 50).await;
        assert!(
            wal::existing(&dir.path().join("wal")).unwrap().len() < 50,
            "old logs are retired"
        );
        let s = reopen(dir.path(), TINY_LOG);
        assert_eq!(s.scan(b"k/", None, false).count(), 50);
    }

    #[tokio::test]
    async fn a_new_log_file_takes_a_seq_above_every_spare_even_with_no_log_left() {
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = dir.path().join("wal");
        let config = TINY_LOG;
        write_through_checkpoints(dir.path(), 30).await;
        let spares = wal::spares(&wal_dir);
        assert!((1..=MAX_SPARES).contains(&spares.len()), "{spares:?}");
        // A start-up replays and retires the logs, then makes a new (empty) one. A crash
        // between the two leaves only spares: removing the empty log stands in for it.
        drop(reopen(dir.path(), config));
        for (_, file) in wal::existing(&wal_dir).unwrap() {
            std::fs::remove_file(file).unwrap();
        }
        let top = wal::spares(&wal_dir).iter().map(|s| s.0).max().unwrap();
        let s = reopen(dir.path(), config);
        let files = wal::existing(&wal_dir).unwrap();
        assert!(
            files.iter().all(|(seq, _)| *seq > top),
            "{files:?} vs spare seq {top}"
        );
        assert_eq!(s.scan(b"k/", None, false).count(), 30);
    }

    /// A log that rolls (and checkpoints) every few records.
    const TINY_LOG: SledConfig = SledConfig {
        cache_capacity_bytes: 1 << 20,
        wal_checkpoint_bytes: 256,
        move_interval_ms: 10,
    };

    /// Writes `n` durable keys `k/<i>` through many checkpoints, then closes the store.
    async fn write_through_checkpoints(path: &Path, n: u32) {
        let s = SledStore::open(path, TINY_LOG).unwrap();
        for i in 0..n {
            let mut b = Batch::new();
            b.put(format!("k/{i:03}").into_bytes(), vec![1u8; 64]);
            s.apply(b).unwrap();
            s.durable().await.unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    /// sled releases its file lock from a background thread after the last handle
    /// drops, so a reopen in the same process may have to wait a moment.
    fn reopen(path: &Path, config: SledConfig) -> Arc<SledStore> {
        (0..200)
            .find_map(|_| match SledStore::open(path, config) {
                Err(Error::Locked { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                }
                other => Some(other.unwrap()),
            })
            .expect("reopened")
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), target).unwrap();
            }
        }
    }
}
