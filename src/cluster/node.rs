//! The lease loop and the routing decision of a cluster node.
//!
//! Every third of a lease the node heartbeats, reads the live nodes, re-reads the global
//! keys other nodes or the CLI wrote (`projects/`, `keys/`), and for each project works
//! out its rendezvous owner among the live nodes: it takes the leases that fall to it and
//! are free or expired, renews the ones it holds, and hands over the ones that now fall
//! to another node (released here first, at a message boundary, then in the table, so the
//! next owner needs no wait). A failed renewal means another node took over: the project
//! is released here at once.
//!
//! Nothing here blocks a thread: the lease table's futures run on the store's runtime,
//! and store reads go through `spawn_blocking`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use mailroom_actors::engine::cluster::{Handover, Holder, Leases, Node as LiveNode};
use mailroom_actors::engine::projects::{Missing, Projects};
use mailroom_actors::error::Result;
use mailroom_actors::model::ProjectId;
use mailroom_actors::Error;

use super::{rendezvous, Identity};

/// Where a request for a project goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This node owns the project: serve it here.
    Serve,
    /// Another live node owns it (or should): pass the request to it.
    Forward { node: String, url: String },
}

/// One tick's work of the loops `start` runs.
type TickWork = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>>>>;

/// Counters for /metrics.
#[derive(Default)]
pub struct ClusterMetrics {
    pub forwards: AtomicU64,
    pub lease_moves: AtomicU64,
}

pub struct ClusterNode {
    pub identity: Identity,
    leases: Arc<dyn Leases>,
    registry: Handover,
    projects: Projects,
    /// The live nodes as the last tick saw them (always this node among them).
    live: RwLock<Vec<LiveNode>>,
    /// One move at a time: a tick's pass and an on-demand acquisition never both load or
    /// release the same project.
    moves: tokio::sync::Mutex<()>,
    /// Projects being handed over or released off the loop: their leases are renewed
    /// until the release ends (so no node takes them before their writes are durable),
    /// and nothing takes them here meanwhile.
    releasing: Mutex<HashSet<ProjectId>>,
    /// Point reads for unknown API keys and project ids in the current second: (when
    /// the second began, how many).
    point_reads: Mutex<(Instant, u32)>,
    /// Lease holders read for routing, with when: a project's requests read the lease
    /// table once a tick, not once each. Forgotten when a forward finds the project
    /// moving.
    holders: Mutex<HashMap<ProjectId, (Instant, Option<Holder>)>>,
    pub metrics: ClusterMetrics,
    /// Forwarding proofs accepted here, each good for one request.
    pub proofs: super::replay::ReplayCache,
}

/// At most this many point reads a second for API keys or project ids this node does
/// not know: a hostile client sending random keys must not turn each request into a
/// database read, and a key made a moment ago elsewhere still works here at once.
const POINT_READS_PER_SECOND: u32 = 50;

/// Bounds of the pause before routing a request again while its project moves: short
/// enough to serve it soon after the move, long enough not to hammer the lease table.
const ROUTE_PAUSE_MIN: Duration = Duration::from_millis(100);
const ROUTE_PAUSE_MAX: Duration = Duration::from_millis(1000);

/// Past this many remembered lease holders the stale ones are dropped (routing reaches
/// only existing projects, so this bounds memory, not correctness).
const HOLDERS_MAX: usize = 100_000;

impl ClusterNode {
    pub fn new(
        identity: Identity,
        leases: Arc<dyn Leases>,
        registry: Handover,
        projects: Projects,
    ) -> Arc<ClusterNode> {
        let me = LiveNode {
            id: identity.node_id.clone(),
            url: identity.advertise_url.clone(),
        };
        Arc::new(ClusterNode {
            identity,
            leases,
            registry,
            projects,
            live: RwLock::new(vec![me]),
            moves: tokio::sync::Mutex::new(()),
            releasing: Mutex::new(HashSet::new()),
            point_reads: Mutex::new((Instant::now(), 0)),
            holders: Mutex::new(HashMap::new()),
            metrics: ClusterMetrics::default(),
            proofs: Default::default(),
        })
    }

    fn me(&self) -> &str {
        &self.identity.node_id
    }

    fn lease_seconds(&self) -> u64 {
        self.identity.lease.as_secs()
    }

    /// How long a lease taken or renewed when `asked` is surely still ours: the lease,
    /// less the time the database took to answer and a margin for clock drift between
    /// this node's monotonic clock and the database's.
    fn valid_for(&self, asked: Instant) -> Duration {
        let margin = (self.identity.lease / 5).max(Duration::from_millis(300));
        self.identity
            .lease
            .saturating_sub(margin)
            .saturating_sub(asked.elapsed())
    }

    /// Runs the lease loop on the current (actix) runtime until the process ends.
    pub fn start(self: &Arc<Self>) {
        // The heartbeat has its own timer: a slow pass (many takes, a slow database) must
        // not make the other nodes think this one gone and take all its projects.
        self.every_tick("heartbeat failed; retrying at the next", |node| {
            Box::pin(async move {
                node.leases
                    .heartbeat(node.me(), &node.identity.advertise_url)
                    .await
            })
        });
        // Revocation has its own timer too: a tick that takes many projects can last
        // seconds, and a key rotated or a project disabled elsewhere (another node, the
        // CLI) must be refused here within a lease and two seconds.
        self.every_tick(
            "re-reading projects and keys failed; retrying at the next tick",
            |node| Box::pin(async move { node.refresh_keys().await }),
        );
        self.every_tick("cluster tick failed; retrying at the next", |node| {
            Box::pin(async move { node.tick().await })
        });
    }

    /// Runs `work` every tick (a third of a lease) until the process ends; a failure is
    /// logged as `failed` and the next tick tries again.
    fn every_tick(self: &Arc<Self>, failed: &'static str, work: fn(Arc<ClusterNode>) -> TickWork) {
        let node = self.clone();
        actix_web::rt::spawn(async move {
            let mut every = tokio::time::interval(node.identity.tick());
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if let Err(e) = work(node.clone()).await {
                    tracing::warn!(error = %e, node = node.me(), "{failed}");
                }
            }
        });
    }

    /// One pass of the loop (also run once at start-up, before serving).
    pub async fn tick(self: &Arc<Self>) -> Result<()> {
        self.leases
            .heartbeat(self.me(), &self.identity.advertise_url)
            .await?;
        let mut live = self.leases.live_nodes(self.lease_seconds()).await?;
        if !live.iter().any(|n| n.id == self.me()) {
            live.push(LiveNode {
                id: self.me().to_owned(),
                url: self.identity.advertise_url.clone(),
            });
        }
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = live.clone();
        self.refresh_keys().await?;
        let projects = self.project_ids().await?;
        let ids: Vec<&str> = live.iter().map(|n| n.id.as_str()).collect();
        let _one = self.moves.lock().await;
        let ownership = self.registry.ownership().clone();
        let known: HashSet<ProjectId> = projects.iter().copied().collect();
        // Held here but deleted since (or never listed): hand back.
        let mut held: Vec<ProjectId> = ownership.held().into_iter().map(|(p, _)| p).collect();
        held.retain(|p| !known.contains(p));
        for p in held {
            self.hand_over_later(p, "the project is gone");
        }
        // Renewals first and in one statement (a take loads a project, ~0.5 s each):
        // what this node serves must not run out while it takes more.
        let mut renew = Vec::new();
        let mut takes = Vec::new();
        for p in projects {
            let target = rendezvous::owner(&ids, p).unwrap_or(self.me());
            let releasing = self.is_releasing(p);
            match ownership.epoch(p) {
                // A project being released stays ours in the table until its release
                // ends: no node takes it before its writes are durable.
                Some(epoch) if releasing || target == self.me() => renew.push((p, epoch)),
                Some(_) => self.hand_over_later(p, "another node is its rendezvous owner"),
                None if target == self.me() && !releasing => takes.push(p),
                None => {}
            }
        }
        let asked = Instant::now();
        match self
            .leases
            .renew_all(renew.clone(), self.me(), self.lease_seconds())
            .await
        {
            Ok(lost) => {
                let lost: HashSet<ProjectId> = lost.into_iter().collect();
                for (p, epoch) in renew {
                    if self.is_releasing(p) {
                        continue;
                    }
                    if lost.contains(&p) {
                        tracing::warn!(project = %p, epoch, "lease lost to another node; releasing here");
                        self.metrics.lease_moves.fetch_add(1, Ordering::Relaxed);
                        self.release_later(p);
                    } else {
                        self.registry.renew(p, self.valid_for(asked));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(leases = renew.len(), error = %e, "renewing the leases failed; the local deadlines still hold");
            }
        }
        for p in takes {
            if let Err(e) = self.take(p).await {
                tracing::warn!(project = %p, error = %e, "acquiring a lease failed");
            }
        }
        Ok(())
    }

    /// Takes the lease of `p` when free, expired or ours, and loads the project. Ok(false):
    /// another node holds it.
    async fn take(&self, p: ProjectId) -> Result<bool> {
        let asked = Instant::now();
        let Some(epoch) = self
            .leases
            .try_acquire(p, self.me(), self.lease_seconds())
            .await?
        else {
            return Ok(false);
        };
        if let Err(e) = self.registry.acquire(p, epoch, self.valid_for(asked)).await {
            // Loading failed: give the lease back so that another node (or the next
            // tick) can try, instead of holding a project nobody serves.
            let _ = self.leases.release(p, self.me(), epoch).await;
            return Err(e);
        }
        self.metrics.lease_moves.fetch_add(1, Ordering::Relaxed);
        tracing::info!(project = %p, epoch, node = self.me(), "lease acquired; project loaded");
        Ok(true)
    }

    fn is_releasing(&self, p: ProjectId) -> bool {
        self.releasing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&p)
    }

    /// Marks `p` as being released; false when it already is.
    fn start_releasing(&self, p: ProjectId) -> bool {
        self.releasing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p)
    }

    fn done_releasing(&self, p: ProjectId) {
        self.releasing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&p);
    }

    /// Hands `p` over off the loop: a release waits for the project's in-flight messages
    /// and deliveries (an SMTP session can take tens of seconds), and the loop must go on
    /// renewing the other leases meanwhile.
    fn hand_over_later(self: &Arc<Self>, p: ProjectId, why: &'static str) {
        if !self.start_releasing(p) {
            return;
        }
        let node = self.clone();
        actix_web::rt::spawn(async move {
            node.hand_over(p, why).await;
            node.done_releasing(p);
        });
    }

    /// Releases a lost project here, off the loop (its lease is another node's already).
    fn release_later(self: &Arc<Self>, p: ProjectId) {
        if !self.start_releasing(p) {
            return;
        }
        let node = self.clone();
        actix_web::rt::spawn(async move {
            if let Err(e) = node.registry.release(p).await {
                tracing::error!(project = %p, error = %e, "releasing a lost project");
            }
            node.done_releasing(p);
        });
    }

    /// Releases `p` here (at a message boundary, its writes made durable), then in the
    /// table, so that its next owner takes it at once.
    async fn hand_over(&self, p: ProjectId, why: &str) {
        let Some(epoch) = self.registry.ownership().epoch(p) else {
            return;
        };
        if let Err(e) = self.registry.release(p).await {
            tracing::error!(project = %p, epoch, error = %e, "releasing a project to hand it over");
            return;
        }
        if let Err(e) = self.leases.release(p, self.me(), epoch).await {
            // The lease then runs out by itself.
            tracing::warn!(project = %p, epoch, error = %e, "ending a handed-over lease failed");
        }
        self.metrics.lease_moves.fetch_add(1, Ordering::Relaxed);
        tracing::info!(project = %p, epoch, why, "lease handed over");
    }

    /// Where a request for `p` goes: here when this node owns it; to the live holder of
    /// its lease; taken here at once when it is free and falls to this node (a project
    /// created a moment ago); else to its rendezvous owner.
    ///
    /// While the project moves (its lease still held by a node that stopped heartbeating,
    /// or by one handing it over) the request is held and routed again, up to a lease and
    /// a second: a move is an internal matter, and a client should not see it as an error.
    /// Only past that does the caller get `NotOwner` (503, Retry-After 1).
    pub async fn route(&self, p: ProjectId) -> Result<Route> {
        let deadline = Instant::now() + self.identity.lease + Duration::from_secs(1);
        loop {
            let wait = match self.route_once(p).await? {
                Ok(route) => return Ok(route),
                Err(wait) => wait,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::NotOwner { project: p });
            }
            tokio::time::sleep(wait.clamp(ROUTE_PAUSE_MIN, ROUTE_PAUSE_MAX).min(left)).await;
            self.forget_holder(p);
        }
    }

    /// The holder of `p`'s lease, read at most once a tick.
    async fn holder(&self, p: ProjectId) -> Result<Option<Holder>> {
        let fresh = self.identity.tick();
        if let Some((at, h)) = self
            .holders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&p)
        {
            if at.elapsed() < fresh {
                return Ok(h.clone());
            }
        }
        let h = self.leases.holder(p).await?;
        let mut holders = self.holders.lock().unwrap_or_else(|e| e.into_inner());
        if holders.len() >= HOLDERS_MAX {
            holders.retain(|_, (at, _)| at.elapsed() < fresh);
        }
        holders.insert(p, (Instant::now(), h.clone()));
        Ok(h)
    }

    /// Makes the next routing of `p` read its lease holder afresh (it moved).
    pub fn forget_holder(&self, p: ProjectId) {
        self.holders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&p);
    }

    /// One routing attempt. Err(wait): nobody can serve `p` yet; try again after about
    /// `wait` (until the lease held elsewhere runs out).
    async fn route_once(&self, p: ProjectId) -> Result<std::result::Result<Route, Duration>> {
        if self.registry.ownership().owns(p) {
            return Ok(Ok(Route::Serve));
        }
        let live = self.live.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut wait = ROUTE_PAUSE_MIN;
        if let Some((node, url, expires_ms)) = self.holder(p).await? {
            // This node's wall clock only steers the request here; the database's clock
            // decides who may write.
            let left_ms = expires_ms - chrono::Utc::now().timestamp_millis();
            if left_ms > 0 && node != self.me() && live.iter().any(|n| n.id == node) {
                return Ok(Ok(Route::Forward { node, url }));
            }
            wait = Duration::from_millis(left_ms.max(0) as u64 + 50);
        }
        let ids: Vec<&str> = live.iter().map(|n| n.id.as_str()).collect();
        let target = rendezvous::owner(&ids, p).unwrap_or(self.me()).to_owned();
        if target == self.me() {
            if self.projects.get(p).is_err() {
                // Never a lease row or a load for an id that names no project.
                return Err(Error::NotFound(mailroom_actors::error::Resource::Project));
            }
            if self.is_releasing(p) {
                return Ok(Err(ROUTE_PAUSE_MIN));
            }
            let _one = self.moves.lock().await;
            if self.registry.ownership().owns(p) || self.take(p).await? {
                return Ok(Ok(Route::Serve));
            }
            // Held by a node that stopped heartbeating (paused, partitioned) or by this
            // node past its local deadline: wait for the lease to run out.
            return Ok(Err(wait));
        }
        let url = live
            .iter()
            .find(|n| n.id == target)
            .map(|n| n.url.clone())
            .unwrap_or_default();
        Ok(Ok(Route::Forward { node: target, url }))
    }

    /// Reads `key` (an API key's hash key, or a project's record) from the database
    /// into this node's view, and the project record an API key points to: a key or
    /// project made a moment ago on another node or by the CLI. Rate-limited to
    /// `POINT_READS_PER_SECOND`; false when over it or when the read failed.
    pub async fn read_through(&self, missing: Missing) -> bool {
        {
            let mut reads = self.point_reads.lock().unwrap_or_else(|p| p.into_inner());
            if reads.0.elapsed() >= Duration::from_secs(1) {
                *reads = (Instant::now(), 0);
            }
            if reads.1 >= POINT_READS_PER_SECOND {
                return false;
            }
            reads.1 += 1;
        }
        let projects = self.projects.clone();
        actix_web::rt::task::spawn_blocking(move || projects.read_through(missing))
            .await
            .map_err(|e| Error::Internal(format!("reading a key: {e}")))
            .and_then(|r| r)
            .is_ok()
    }

    /// Re-reads the projects and keys that other nodes or the CLI wrote, then empties
    /// the cache of keys built on the old copies: a rotated key, a disabled or a deleted
    /// project is refused here from now on.
    pub async fn refresh_keys(&self) -> Result<()> {
        let projects = self.projects.clone();
        actix_web::rt::task::spawn_blocking(move || projects.reload())
            .await
            .map_err(|e| Error::Internal(format!("reloading global keys: {e}")))?
    }

    async fn project_ids(&self) -> Result<Vec<ProjectId>> {
        let projects = self.projects.clone();
        actix_web::rt::task::spawn_blocking(move || {
            Ok(projects.list()?.into_iter().map(|p| p.id).collect())
        })
        .await
        .map_err(|e| Error::Internal(format!("listing projects: {e}")))?
    }

    /// The live nodes the last tick saw, by id: for /health.
    pub fn live_count(&self) -> usize {
        self.live.read().map(|l| l.len()).unwrap_or(0)
    }

    /// The leases held now (for /metrics).
    pub fn leases_held(&self) -> usize {
        self.registry.ownership().count()
    }

    /// Releases every project, each handed over in the table too: a clean stop lets the
    /// other nodes take over at once instead of after the lease runs out.
    pub async fn release_all(&self) {
        let _one = self.moves.lock().await;
        let held: HashMap<ProjectId, u64> = self.registry.ownership().held().into_iter().collect();
        for p in held.keys() {
            self.hand_over(*p, "this node is stopping").await;
        }
    }
}
