//! Which projects this node may run work for. On sled a node owns every project
//! (`everything`); a cluster node owns the projects whose lease it holds (`none` to
//! begin with, then `acquire`d and `release`d by the Registry as leases move).
//!
//! `owns(p)` is what every path that starts work for a project asks first (a message
//! to its actor, an email handed to a mailer, a timer, a campaign batch, a workflow
//! step). It holds only until a local deadline, set at each acquire and renew to the
//! time the lease is sure to be ours and measured on the monotonic clock: a node that
//! was paused (SIGSTOP) past its lease wakes up no longer owning anything, and stops
//! sending before it even learns from the database that another node took over. The
//! database's fence then refuses whatever writes it had under way.
//!
//! A project being released is still `holds`: the work that was under way when the
//! release began (an email already with a mailer) may write its outcome, and the
//! release waits for that work (`enter`/`Working`) before it hands the project over.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::id::ProjectId;

pub struct Ownership {
    everything: bool,
    held: Mutex<HashMap<ProjectId, Held>>,
}

struct Held {
    epoch: u64,
    until: Instant,
    state: State,
    work: Arc<Gate>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Loaded and serving.
    Serving,
    /// Refusing new work; what is under way finishes.
    Releasing,
}

/// The work under way for one project, for its release to wait on.
#[derive(Default)]
struct Gate {
    under_way: AtomicUsize,
    ended: Notify,
}

/// Held while one piece of a project's work runs (a delivery until its outcome is
/// written); a release of the project waits until every one is dropped.
pub struct Working {
    gate: Arc<Gate>,
}

impl Drop for Working {
    fn drop(&mut self) {
        self.gate.under_way.fetch_sub(1, Ordering::AcqRel);
        self.gate.ended.notify_waiters();
    }
}

impl Ownership {
    /// A node alone with its data (sled): every project is its own, for ever.
    pub fn everything() -> Arc<Self> {
        Arc::new(Ownership {
            everything: true,
            held: Mutex::default(),
        })
    }

    /// A cluster node before it holds any lease.
    pub fn none() -> Arc<Self> {
        Arc::new(Ownership {
            everything: false,
            held: Mutex::default(),
        })
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<ProjectId, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this node owns every project (no leases: sled).
    pub fn is_everything(&self) -> bool {
        self.everything
    }

    /// Whether work for `p` may start here now.
    pub fn owns(&self, p: ProjectId) -> bool {
        self.owns_at(p, Instant::now())
    }

    /// `owns` as of `now` (tests move time with it).
    pub fn owns_at(&self, p: ProjectId, now: Instant) -> bool {
        self.everything
            || self
                .map()
                .get(&p)
                .is_some_and(|h| h.state == State::Serving && now < h.until)
    }

    /// Whether `p` is held at all, serving or being released, whatever its deadline:
    /// work already under way may finish (the database's fence has the last word).
    pub fn holds(&self, p: ProjectId) -> bool {
        self.everything || self.map().contains_key(&p)
    }

    /// The projects held and serving, with their epochs (empty for `everything`,
    /// which holds no leases).
    pub fn owned(&self) -> Vec<(ProjectId, u64)> {
        let now = Instant::now();
        self.map()
            .iter()
            .filter(|(_, h)| h.state == State::Serving && now < h.until)
            .map(|(p, h)| (*p, h.epoch))
            .collect()
    }

    /// Every project held, with its epoch: also those past their local deadline or
    /// being released (what a clean stop hands over, what a lease renewal covers).
    pub fn held(&self) -> Vec<(ProjectId, u64)> {
        self.map().iter().map(|(p, h)| (*p, h.epoch)).collect()
    }

    /// How many projects are owned now (0 for `everything`, see `owned`).
    pub fn count(&self) -> usize {
        self.owned().len()
    }

    /// The epoch held for `p`, serving or releasing.
    pub fn epoch(&self, p: ProjectId) -> Option<u64> {
        self.map().get(&p).map(|h| h.epoch)
    }

    /// Starts owning `p` under `epoch` until `valid_for` from now (the Registry, once
    /// the project is loaded).
    pub(crate) fn hold(&self, p: ProjectId, epoch: u64, valid_for: Duration) {
        self.hold_at(p, epoch, valid_for, Instant::now())
    }

    fn hold_at(&self, p: ProjectId, epoch: u64, valid_for: Duration, now: Instant) {
        self.map().insert(
            p,
            Held {
                epoch,
                until: now + valid_for,
                state: State::Serving,
                work: Arc::default(),
            },
        );
    }

    /// Moves `p`'s deadline to `valid_for` from now; false when `p` is not held and
    /// serving (nothing moves then).
    pub fn renew(&self, p: ProjectId, valid_for: Duration) -> bool {
        self.renew_at(p, valid_for, Instant::now())
    }

    /// `renew` as of `now`.
    pub fn renew_at(&self, p: ProjectId, valid_for: Duration, now: Instant) -> bool {
        match self.map().get_mut(&p) {
            Some(h) if h.state == State::Serving => {
                h.until = now + valid_for;
                true
            }
            _ => false,
        }
    }

    /// Refuses new work for `p` from now on; answers the gate its release waits on, or
    /// None when `p` was not held.
    pub(crate) fn begin_release(&self, p: ProjectId) -> Option<ReleaseWait> {
        let mut held = self.map();
        let h = held.get_mut(&p)?;
        h.state = State::Releasing;
        Some(ReleaseWait {
            gate: h.work.clone(),
        })
    }

    /// Forgets `p` (the end of its release).
    pub(crate) fn forget(&self, p: ProjectId) {
        self.map().remove(&p);
    }

    /// Lets a piece of `p`'s work start if `p` is owned now; the release of `p` waits
    /// until the answer is dropped.
    pub fn enter(&self, p: ProjectId) -> Option<Option<Working>> {
        if self.everything {
            return Some(None);
        }
        let held = self.map();
        let h = held
            .get(&p)
            .filter(|h| h.state == State::Serving && Instant::now() < h.until)?;
        // Counted under the lock that `begin_release` takes: a release that begins
        // after this sees it.
        h.work.under_way.fetch_add(1, Ordering::AcqRel);
        Some(Some(Working {
            gate: h.work.clone(),
        }))
    }
}

/// The work of a project being released, still under way.
pub(crate) struct ReleaseWait {
    gate: Arc<Gate>,
}

impl ReleaseWait {
    /// Resolves once no work entered before the release is under way, or after `limit`;
    /// answers how many were still under way then.
    pub(crate) async fn idle(&self, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.gate.ended.notified();
            let n = self.gate.under_way.load(Ordering::Acquire);
            if n == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return self.gate.under_way.load(Ordering::Acquire);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(8);

    #[test]
    fn a_node_alone_owns_every_project_and_a_cluster_node_none_until_it_holds_one() {
        let p = ProjectId::new();
        assert!(Ownership::everything().owns(p));
        let node = Ownership::none();
        assert!(!node.owns(p));
        node.hold(p, 3, LEASE);
        assert!(node.owns(p));
        assert!(!node.owns(ProjectId::new()));
        assert_eq!(node.owned(), vec![(p, 3)]);
        assert_eq!(node.count(), 1);
    }

    #[test]
    fn a_project_is_no_longer_owned_once_its_local_deadline_passes() {
        let (node, p, t0) = (Ownership::none(), ProjectId::new(), Instant::now());
        node.hold_at(p, 1, LEASE, t0);
        assert!(node.owns_at(p, t0 + LEASE - Duration::from_millis(1)));
        assert!(
            !node.owns_at(p, t0 + LEASE),
            "a paused node wakes up owning nothing"
        );
        assert!(
            node.holds(p),
            "still held: work under way may write its outcome"
        );
        assert_eq!(node.held(), vec![(p, 1)], "held until released");
    }

    #[test]
    fn a_renewal_moves_the_deadline_and_a_released_project_cannot_be_renewed() {
        let (node, p, t0) = (Ownership::none(), ProjectId::new(), Instant::now());
        node.hold_at(p, 1, LEASE, t0);
        assert!(node.renew_at(p, LEASE, t0 + Duration::from_secs(5)));
        assert!(node.owns_at(p, t0 + LEASE + Duration::from_secs(4)));
        assert!(!node.owns_at(p, t0 + LEASE + Duration::from_secs(5)));
        node.begin_release(p).unwrap();
        assert!(!node.owns_at(p, t0), "a release refuses new work at once");
        assert!(!node.renew(p, LEASE));
        node.forget(p);
        assert!(!node.holds(p));
        assert!(!node.renew(ProjectId::new(), LEASE));
    }

    #[actix::test]
    async fn a_release_waits_for_the_work_under_way_and_refuses_new_work() {
        let (node, p) = (Ownership::none(), ProjectId::new());
        node.hold(p, 1, LEASE);
        let working = node.enter(p).expect("owned").expect("counted");
        let wait = node.begin_release(p).unwrap();
        assert!(
            node.enter(p).is_none(),
            "no new work once the release began"
        );
        assert_eq!(wait.idle(Duration::from_millis(20)).await, 1);
        let done = tokio::spawn(async move { wait.idle(Duration::from_secs(10)).await });
        drop(working);
        assert_eq!(done.await.unwrap(), 0);
    }
}
