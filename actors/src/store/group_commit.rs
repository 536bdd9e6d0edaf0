//! Group commit: writers register after applying their batch and wait for the next
//! flush that starts after they registered. One flusher thread runs flushes back to
//! back while anyone waits, so under load each fsync acknowledges many writes.

use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use tokio::sync::watch;

use crate::error::{Error, Result};

/// The flush a waiter needs, and the last one finished (with its outcome).
struct State {
    /// Generation the next flush will carry; a waiter registered now needs it.
    next: u64,
    waiting: bool,
    stopping: bool,
}

#[derive(Clone)]
pub struct GroupCommit {
    inner: Arc<Inner>,
    thread: Arc<Mutex<Option<thread::JoinHandle<()>>>>,
}

struct Inner {
    state: Mutex<State>,
    wake: Condvar,
    /// (last generation flushed, last generation that succeeded). A failed flush puts
    /// its writes back for the next one, so a waiter is durable once any flush at or
    /// after its generation succeeded, whatever a later one did.
    done: watch::Sender<(u64, u64)>,
    /// Whether the last failed flush failed for a full disk, so that waiters say so
    /// (the edge answers 503 for that, not 500).
    disk_full: std::sync::atomic::AtomicBool,
    /// Whether it failed for a store that did not answer in time (also a 503).
    unavailable: std::sync::atomic::AtomicBool,
}

impl GroupCommit {
    /// Starts the flusher thread. `flush` is the blocking durability call.
    pub fn start<F>(flush: F) -> Self
    where
        F: Fn() -> Result<()> + Send + 'static,
    {
        let (done, _) = watch::channel((0, 0));
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                next: 1,
                waiting: false,
                stopping: false,
            }),
            wake: Condvar::new(),
            done,
            disk_full: std::sync::atomic::AtomicBool::new(false),
            unavailable: std::sync::atomic::AtomicBool::new(false),
        });
        let worker = inner.clone();
        let handle = thread::Builder::new()
            .name("store-flusher".into())
            .spawn(move || worker.run(flush))
            .expect("spawn the store flusher thread");
        GroupCommit {
            inner,
            thread: Arc::new(Mutex::new(Some(handle))),
        }
    }

    /// Resolves when a flush that began after this call has finished.
    pub fn wait(&self) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        let target = {
            let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
            st.waiting = true;
            st.next
        };
        self.inner.wake.notify_one();
        let mut rx = self.inner.done.subscribe();
        let inner = self.inner.clone();
        async move {
            let last_ok = rx
                .wait_for(|(gen, _)| *gen >= target)
                .await
                .map(|v| v.1)
                .map_err(|_| Error::storage("the store flusher has stopped"))?;
            if last_ok >= target {
                Ok(())
            } else {
                const CONTEXT: &str =
                    "writing the write-ahead log failed; this write is not durable yet";
                Err(
                    if inner.disk_full.load(std::sync::atomic::Ordering::Relaxed) {
                        Error::storage_caused(
                            CONTEXT,
                            std::io::Error::from(std::io::ErrorKind::StorageFull),
                        )
                    } else if inner.unavailable.load(std::sync::atomic::Ordering::Relaxed) {
                        Error::unavailable(CONTEXT)
                    } else {
                        Error::storage(CONTEXT)
                    },
                )
            }
        }
    }

    /// Stops the flusher after its last flush, and waits for it.
    pub fn stop(&self) {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stopping = true;
        self.inner.wake.notify_one();
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Inner {
    fn run<F: Fn() -> Result<()>>(&self, flush: F) {
        loop {
            let gen = {
                let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                while !st.waiting && !st.stopping {
                    st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                if st.stopping && !st.waiting {
                    return;
                }
                st.waiting = false;
                let gen = st.next;
                st.next += 1;
                gen
            };
            let started = std::time::Instant::now();
            let outcome = flush();
            tracing::trace!(
                gen,
                micros = started.elapsed().as_micros() as u64,
                "store flush"
            );
            let last_ok = match outcome {
                Ok(()) => gen,
                Err(e) => {
                    tracing::error!(error = %e, source = ?std::error::Error::source(&e), "store flush failed");
                    self.disk_full
                        .store(e.is_disk_full(), std::sync::atomic::Ordering::Relaxed);
                    self.unavailable
                        .store(e.is_unavailable(), std::sync::atomic::Ordering::Relaxed);
                    self.done.borrow().1
                }
            };
            self.done.send_replace((gen, last_ok));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn many_waiters_share_few_flushes() {
        let flushes = Arc::new(AtomicU64::new(0));
        let f = flushes.clone();
        let gc = GroupCommit::start(move || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            f.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let waits: Vec<_> = (0..100).map(|_| gc.wait()).collect();
        for w in waits {
            w.await.unwrap();
        }
        let n = flushes.load(Ordering::SeqCst);
        assert!((1..=2).contains(&n), "100 waiters took {n} flushes");
        gc.stop();
    }

    #[tokio::test]
    async fn a_later_failed_flush_does_not_fail_a_waiter_whose_flush_succeeded() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Barrier;
        let fail = Arc::new(AtomicBool::new(false));
        let (started, gate) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let (f, s, g) = (fail.clone(), started.clone(), gate.clone());
        let gc = GroupCommit::start(move || {
            if f.load(Ordering::SeqCst) {
                return Err(Error::storage("disk gone"));
            }
            // The first flush is under way while the test fails the ones after it.
            s.wait();
            g.wait();
            Ok(())
        });
        let first = gc.wait();
        started.wait();
        fail.store(true, Ordering::SeqCst);
        gate.wait();
        let second = gc.wait();
        assert!(second.await.is_err(), "the second flush failed");
        assert!(first.await.is_ok(), "the first flush had succeeded");
        gc.stop();
    }

    #[tokio::test]
    async fn a_failed_flush_is_reported_to_its_waiters() {
        let gc = GroupCommit::start(|| Err(Error::storage("disk gone")));
        assert!(gc.wait().await.is_err());
        gc.stop();
    }
}
