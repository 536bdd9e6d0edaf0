//! The drain of a clean stop. Background work (an SMTP attempt and the write of its
//! outcome, a campaign batch, a workflow step) runs holding a `Busy` of this gate; once
//! the stop begins no new one is let in, and the server waits for those held to end
//! before it flushes and exits. Between two such steps all state is durable already,
//! so what is parked there resumes at the next start, and nothing is done twice: an
//! email whose relay said yes has its outcome written before the process goes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// The kinds of work a stop waits for, counted apart for the shutdown log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// An email between the outbox and the record of its outcome.
    Delivery,
    /// A campaign runner's batch (or its audience being fixed, or its end).
    Campaign,
    /// A workflow execution's step.
    Workflow,
}

const KINDS: usize = 3;

impl Work {
    fn slot(self) -> usize {
        match self {
            Work::Delivery => 0,
            Work::Campaign => 1,
            Work::Workflow => 2,
        }
    }
}

/// How much of each kind of work is under way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busyness {
    pub deliveries: usize,
    pub campaign_batches: usize,
    pub workflow_steps: usize,
}

impl Busyness {
    pub fn total(&self) -> usize {
        self.deliveries + self.campaign_batches + self.workflow_steps
    }
}

#[derive(Default)]
pub struct Drain {
    stopping: AtomicBool,
    busy: [AtomicUsize; KINDS],
    /// Rung when the stop begins, for work that waits (a paced email) to give up.
    stop: Notify,
    /// Rung when a piece of work ends, for the stop that waits on it.
    ended: Notify,
}

/// Held while one piece of work runs; the stop waits until every one is dropped.
pub struct Busy {
    drain: Arc<Drain>,
    kind: Work,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.drain.busy[self.kind.slot()].fetch_sub(1, Ordering::AcqRel);
        self.drain.ended.notify_waiters();
    }
}

impl Drain {
    /// Lets a piece of work start, unless the stop has begun (then park instead).
    pub fn enter(self: &Arc<Self>, kind: Work) -> Option<Busy> {
        // Counted before the check: a stop that begins in between then sees it and
        // waits for it, rather than flushing under it.
        self.busy[kind.slot()].fetch_add(1, Ordering::AcqRel);
        let busy = Busy {
            drain: self.clone(),
            kind,
        };
        if self.is_stopping() {
            return None;
        }
        Some(busy)
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Begins the stop: no new work starts from now on. Answers what was under way.
    pub fn begin(&self) -> Busyness {
        self.stopping.store(true, Ordering::Release);
        self.stop.notify_waiters();
        self.busyness()
    }

    /// Resolves once the stop has begun.
    pub async fn stopped(&self) {
        loop {
            let rung = self.stop.notified();
            tokio::pin!(rung);
            rung.as_mut().enable();
            if self.is_stopping() {
                return;
            }
            rung.await;
        }
    }

    pub fn busyness(&self) -> Busyness {
        let n = |k: Work| self.busy[k.slot()].load(Ordering::Acquire);
        Busyness {
            deliveries: n(Work::Delivery),
            campaign_batches: n(Work::Campaign),
            workflow_steps: n(Work::Workflow),
        }
    }

    /// Waits until no work is under way, at most `limit`; answers what is left then.
    pub async fn idle(&self, limit: Duration) -> Busyness {
        let wait = async {
            loop {
                let ended = self.ended.notified();
                tokio::pin!(ended);
                ended.as_mut().enable();
                if self.busyness().total() == 0 {
                    return;
                }
                ended.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
        self.busyness()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_waits_for_work_under_way_and_lets_none_start() {
        let drain = Arc::new(Drain::default());
        let held = drain.enter(Work::Delivery).expect("before the stop");
        let at_stop = drain.begin();
        assert_eq!(at_stop.deliveries, 1);
        assert!(
            drain.enter(Work::Campaign).is_none(),
            "parked after the stop"
        );
        assert_eq!(
            drain.idle(Duration::from_millis(20)).await.deliveries,
            1,
            "still held, so the wait ends at its limit"
        );
        let waiter = {
            let drain = drain.clone();
            tokio::spawn(async move { drain.idle(Duration::from_secs(30)).await })
        };
        drop(held);
        let left = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the wait ends when the work does")
            .unwrap();
        assert_eq!(left.total(), 0);
        drain.stopped().await;
    }
}
