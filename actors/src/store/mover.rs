//! Moves synced writes from the overlay into sled, on a thread of its own.
//!
//! The flusher hands over each group it has synced to the log (its ops, in log order,
//! and the overlay version they reach), and the mover applies them to sled in the same
//! order, several groups folded into one sled batch. So sled always holds exactly a
//! prefix of the log (never a write the log lacks), and the flusher acknowledges a
//! group as soon as its `fdatasync` returns instead of after sled's apply, which
//! measured as the larger half of each sync cycle. Waiting `interval` before a move
//! lets more groups share one sled batch: sled rolls its IO buffer twice per batch,
//! and keys written again and again (counters, statistics) go in once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::Op;
use crate::error::Result;

/// Groups synced to the log and not yet in sled, and a log file waiting for them.
#[derive(Default)]
struct Queue {
    groups: Vec<(Vec<Op>, u64)>,
    /// A rotated log file, deletable once sled holds every write up to this version
    /// and has been flushed.
    checkpoint: Option<(PathBuf, u64)>,
    stopping: bool,
}

pub struct Mover {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// One move at a time: the thread, or a caller that wants everything moved now.
    moving: Mutex<u64>,
    interval: Duration,
    /// Open snapshots (`freeze`): while any is, no move starts, so sled holds still.
    frozen: Mutex<usize>,
    thaw: Condvar,
    /// Moves waiting for the freezes to end (for the tests: a move is held back).
    held_back: std::sync::atomic::AtomicUsize,
}

/// While held, sled receives no write (see `Mover::freeze`); dropping it lets moves go on.
pub struct Freeze {
    mover: Arc<Mover>,
}

impl Drop for Freeze {
    fn drop(&mut self) {
        let mut frozen = lock(&self.mover.frozen);
        *frozen = frozen.saturating_sub(1);
        if *frozen == 0 {
            self.mover.thaw.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the mover does with a folded group: write it to sled and forget it in the
/// overlay (`upto` is the overlay version the ops reach).
pub trait Target: Send + Sync + 'static {
    fn apply(&self, folded: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, upto: u64) -> Result<()>;
    /// Makes sled's files durable and removes a log file they now cover.
    fn checkpoint(&self, old_log: PathBuf);
    /// A checkpoint that will not run (the store is closing with writes sled lacks):
    /// its log file stays for the next start to replay.
    fn abandon_checkpoint(&self) {}
}

impl Mover {
    pub fn new(interval: Duration) -> Arc<Self> {
        Arc::new(Mover {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            moving: Mutex::new(0),
            interval,
            frozen: Mutex::new(0),
            thaw: Condvar::new(),
            held_back: Default::default(),
        })
    }

    /// Waits for a move under way to finish, then holds every later one until the
    /// guard drops. Only the mover writes to sled, so meanwhile sled is exactly the
    /// log's prefix it had reached, and writers go on (into the log and the overlay).
    pub fn freeze(self: &Arc<Self>) -> Freeze {
        let _no_move_under_way = lock(&self.moving);
        *lock(&self.frozen) += 1;
        Freeze {
            mover: self.clone(),
        }
    }

    /// Called by the flusher, in log order, after the group's log records are synced.
    pub fn push(&self, ops: Vec<Op>, upto: u64) {
        if ops.is_empty() {
            return;
        }
        lock(&self.queue).groups.push((ops, upto));
        self.wake.notify_one();
    }

    /// Called by the flusher after rotating the log: `old` may go once sled has
    /// everything up to `upto`.
    pub fn checkpoint_after(&self, old: PathBuf, upto: u64) {
        lock(&self.queue).checkpoint = Some((old, upto));
        self.wake.notify_one();
    }

    pub fn stop(&self) {
        lock(&self.queue).stopping = true;
        self.wake.notify_one();
    }

    /// Moves every group pushed so far, now, on the calling thread.
    pub fn move_now(&self, target: &dyn Target) -> Result<()> {
        // Held back, it waits without holding `moving`: a freeze then costs nothing
        // while another (a backup's, for minutes) is held, and only waits out a move
        // under way. Once it holds `moving`, no freeze is held, and a later one waits
        // for this move.
        let mut moved = loop {
            {
                let mut frozen = lock(&self.frozen);
                if *frozen > 0 {
                    self.held_back
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    while *frozen > 0 {
                        frozen = self.thaw.wait(frozen).unwrap_or_else(|p| p.into_inner());
                    }
                    self.held_back
                        .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            let moving = lock(&self.moving);
            if *lock(&self.frozen) == 0 {
                break moving;
            }
        };
        let (groups, checkpoint) = {
            let mut q = lock(&self.queue);
            (std::mem::take(&mut q.groups), q.checkpoint.take())
        };
        let mut upto = *moved;
        if !groups.is_empty() {
            let started = std::time::Instant::now();
            let n_groups = groups.len();
            let mut folded = BTreeMap::new();
            for (ops, reach) in groups {
                upto = upto.max(reach);
                for op in ops {
                    match op {
                        Op::Put(k, v) => folded.insert(k, Some(v)),
                        Op::Delete(k) => folded.insert(k, None),
                    };
                }
            }
            if let Err(e) = target.apply(&folded, upto) {
                // The log still has these writes and the overlay still serves them. They
                // go back to the front of the queue (folded into one group), with the
                // checkpoint, so the next move tries them again: dropping them would
                // keep them in the overlay and the log file on disk for the rest of the run.
                tracing::error!(error = %e, "moving synced writes into sled failed; will retry");
                let ops = folded
                    .into_iter()
                    .map(|(k, v)| match v {
                        Some(v) => Op::Put(k, v),
                        None => Op::Delete(k),
                    })
                    .collect();
                let mut q = lock(&self.queue);
                q.groups.insert(0, (ops, upto));
                if q.checkpoint.is_none() {
                    q.checkpoint = checkpoint;
                }
                return Err(e);
            }
            *moved = upto;
            tracing::debug!(
                groups = n_groups,
                keys = folded.len(),
                bytes = folded
                    .iter()
                    .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
                    .sum::<usize>(),
                micros = started.elapsed().as_micros() as u64,
                "moved synced writes into sled"
            );
        }
        match checkpoint {
            Some((old, at)) if at <= *moved => target.checkpoint(old),
            Some(pending) => lock(&self.queue).checkpoint = Some(pending),
            None => {}
        }
        Ok(())
    }

    /// The mover thread's loop: wait for work, let a little more gather, move it.
    pub fn run(&self, target: &dyn Target) {
        loop {
            {
                let mut q = lock(&self.queue);
                while q.groups.is_empty() && q.checkpoint.is_none() && !q.stopping {
                    q = self.wake.wait(q).unwrap_or_else(|p| p.into_inner());
                }
                if q.stopping && q.groups.is_empty() {
                    drop(q);
                    let _ = self.move_now(target);
                    return;
                }
            }
            std::thread::sleep(self.interval);
            if self.move_now(target).is_err() {
                {
                    let mut q = lock(&self.queue);
                    if q.stopping {
                        // Closing: the log keeps these writes and the next start replays
                        // them; a checkpoint still waiting will not run.
                        if q.checkpoint.take().is_some() {
                            target.abandon_checkpoint();
                        }
                        return;
                    }
                }
                // Back off instead of spinning on a failing disk.
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Fails its first `failures` applies, then keeps what it is given.
    #[derive(Default)]
    struct Flaky {
        failures: AtomicUsize,
        applied: Mutex<BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
        checkpoints: Mutex<Vec<PathBuf>>,
        abandoned: AtomicUsize,
    }

    impl Target for Flaky {
        fn apply(&self, folded: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, _upto: u64) -> Result<()> {
            if self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(crate::error::Error::storage("disk hiccup"));
            }
            lock(&self.applied).extend(folded.clone());
            Ok(())
        }

        fn checkpoint(&self, old_log: PathBuf) {
            lock(&self.checkpoints).push(old_log);
        }

        fn abandon_checkpoint(&self) {
            self.abandoned.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_freeze_taken_while_a_move_is_held_back_by_another_does_not_wait_for_it() {
        let mover = Mover::new(Duration::from_millis(1));
        let target = Arc::new(Flaky::default());
        mover.push(vec![Op::Put(b"a".to_vec(), b"1".to_vec())], 1);
        // A backup's freeze, held for as long as its walk takes.
        let backup = mover.freeze();
        let (m, t) = (mover.clone(), target.clone());
        let moved = std::thread::spawn(move || m.move_now(&*t));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while mover.held_back.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the move is held back"
            );
            std::thread::yield_now();
        }
        // A short read's freeze beside it: it must not wait for the backup to end.
        let (m, (got, took)) = (mover.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            let short = m.freeze();
            let _ = got.send(());
            drop(short);
        });
        took.recv_timeout(Duration::from_secs(10))
            .expect("the second freeze is had at once");
        drop(backup);
        moved.join().unwrap().unwrap();
    }

    #[test]
    fn closing_while_moves_fail_gives_up_the_waiting_checkpoint_instead_of_hanging() {
        let mover = Mover::new(Duration::from_millis(1));
        let target = Arc::new(Flaky {
            failures: AtomicUsize::new(usize::MAX),
            ..Flaky::default()
        });
        mover.push(vec![Op::Put(b"a".to_vec(), b"1".to_vec())], 1);
        mover.checkpoint_after(PathBuf::from("wal-1"), 1);
        mover.stop();
        let (m, t) = (mover.clone(), target.clone());
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            m.run(&*t);
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(10))
            .expect("the mover returns while its moves fail");
        assert_eq!(target.abandoned.load(Ordering::SeqCst), 1);
        assert!(lock(&target.checkpoints).is_empty());
    }

    #[test]
    fn a_failed_move_keeps_its_writes_and_checkpoint_for_the_next_move() {
        let mover = Mover::new(Duration::from_millis(1));
        let target = Flaky {
            failures: AtomicUsize::new(2),
            ..Flaky::default()
        };
        mover.push(vec![Op::Put(b"a".to_vec(), b"1".to_vec())], 1);
        mover.push(
            vec![
                Op::Put(b"b".to_vec(), b"2".to_vec()),
                Op::Delete(b"a".to_vec()),
            ],
            3,
        );
        mover.checkpoint_after(PathBuf::from("wal-1"), 3);
        assert!(mover.move_now(&target).is_err());
        mover.push(vec![Op::Put(b"c".to_vec(), b"3".to_vec())], 4);
        assert!(mover.move_now(&target).is_err());
        assert!(
            lock(&target.checkpoints).is_empty(),
            "no checkpoint before sled has it"
        );
        mover.move_now(&target).unwrap();
        let applied = lock(&target.applied).clone();
        assert_eq!(
            applied.get(b"a".as_slice()),
            Some(&None),
            "the later delete wins"
        );
        assert_eq!(applied.get(b"b".as_slice()), Some(&Some(b"2".to_vec())));
        assert_eq!(applied.get(b"c".as_slice()), Some(&Some(b"3".to_vec())));
        assert_eq!(*lock(&target.checkpoints), [PathBuf::from("wal-1")]);
    }
}
