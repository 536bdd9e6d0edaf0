//! The Registry starts one ProjectActor per project on first use, each under an
//! `actix::Supervisor` on one of a fixed set of arbiters, and routes messages to it.
//!
//! Mailboxes are bounded: the registry counts the messages in flight to each actor and
//! refuses a message past `mailbox_capacity` with `Error::Busy` (the edge answers 503
//! with `Retry-After`) instead of queueing without bound.
//!
//! The registry is also the engine's context: the settings a feature reads at run time
//! (slice sizes, the re-entry cap, template limits) and what features share (timers,
//! attempts, link keys, the counters behind `/metrics`) live here rather than in
//! statics, so that two engines in one process keep their own.
//!
//! In a cluster the registry also moves projects in and out of this node
//! (`acquire`, `renew`, `release`): a message for a project this node does not own is
//! refused with `Error::NotOwner` before it reaches any actor (see `cluster::ownership`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use actix::dev::ToEnvelope;
use actix::{Actor, Addr, Arbiter, ArbiterHandle, Handler, Message, Supervisor};

use super::actor::Guarded;
use super::hooks::Hooks;
use super::wakeups::Wakeups;
use super::{ActorShared, ContactTable, ProjectActor};
use crate::clock::Clock;
use crate::cluster::ownership::Ownership;
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::links::Links;
use crate::metrics::Metrics;
use crate::model::ProjectId;
use crate::project::attempts::Attempts;
use crate::render::RenderPool;
use crate::scheduler::Timers;
use crate::shutdown::Drain;
use crate::store::{keys, Applied, Store};

/// What a feature resumes of a project when this node takes it (its campaigns, its
/// erasures, its imports): the features register it at start-up (`on_acquire`), since
/// the registry names no feature.
pub type Resume = Arc<dyn Fn(&Registry, ProjectId) + Send + Sync>;

/// The longest a release waits for the work under way (an email with a mailer, the
/// messages in its actor's mailbox) before it hands the project over anyway: a relay
/// answers within `smtp.timeout_ms`, so past this something is stuck, and the next
/// owner sending such an email again is the lesser harm than never letting go.
const RELEASE_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
pub struct RegistryConfig {
    /// Threads that host project actors.
    pub arbiters: usize,
    /// Messages that may wait for one project actor before new ones get 503.
    pub mailbox_capacity: usize,
    /// Renders that may run at once (off the actors' threads).
    pub render_threads: usize,
    /// What one project may hold.
    pub tenant: super::TenantLimits,
    /// Executions of one workflow one contact may start within a day, with re-entry.
    pub max_entries_per_day: u32,
    /// Records one slice of a contact's erasure handles (one actor message).
    pub erasure_slice: usize,
    /// Rows one slice of a contact import applies (one actor message).
    pub import_slice_rows: usize,
    /// The bounds on tenant templates, for every compile and render.
    pub templates: crate::render::Limits,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            arbiters: 1,
            mailbox_capacity: 1024,
            render_threads: 1,
            tenant: Default::default(),
            max_entries_per_day: super::wakeups::MAX_ENTRIES_PER_DAY,
            erasure_slice: 1_000,
            import_slice_rows: 1000,
            templates: Default::default(),
        }
    }
}

#[derive(Clone)]
struct Slot {
    addr: Addr<ProjectActor>,
    depth: Arc<AtomicUsize>,
    table: Arc<ContactTable>,
}

#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: RegistryConfig,
    arbiters: Vec<Arbiter>,
    slots: Mutex<HashMap<ProjectId, Slot>>,
    /// Rung when emails were queued, to wake the dispatcher.
    outbox: Arc<tokio::sync::Notify>,
    /// Rung when the clock moved, to run the retention purge now.
    retention: Arc<tokio::sync::Notify>,
    /// Emails in an SMTP attempt (the dispatcher writes it, `GET /emails/{id}` reads it).
    attempts: Arc<Attempts>,
    renders: RenderPool,
    /// The re-entry cap, the durable timers in memory (see `scheduler`) and the
    /// executors' wake-up.
    wakeups: Wakeups,
    /// How marketing mail's links are signed and where they point.
    links: Arc<Links>,
    /// The gate a clean stop closes (see `shutdown`).
    drain: Arc<Drain>,
    /// Test faults (debug builds only, see `faults`).
    faults: Arc<Faults>,
    /// Which projects this node may run work for.
    ownership: Arc<Ownership>,
    /// One acquire or release of a project at a time.
    moves: Mutex<HashMap<ProjectId, Arc<tokio::sync::Mutex<()>>>>,
    /// What the features resume of a project this node takes.
    resumes: Mutex<Vec<Resume>>,
    /// Per-project rates whose state moves with a project (`carry_pace`).
    paces: Mutex<Vec<(String, Arc<crate::pace::Pace>)>>,
    /// What the features do inside each write (`crate::wiring::hooks()`).
    hooks: Arc<Hooks>,
}

/// Decrements a mailbox depth however the send ends (answered, failed or cancelled).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Registry {
    #[cfg(test)]
    /// Must be called inside a running actix System. The engine owns every project.
    /// `hooks` are what the features do inside the core's writes: `wiring::hooks()`.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: RegistryConfig,
        links: Links,
        hooks: Hooks,
    ) -> Self {
        Registry::with_ownership(store, clock, config, links, Ownership::everything(), hooks)
    }

    /// A registry that serves only the projects `ownership` says (a cluster node:
    /// `Ownership::none()`, then `acquire`). Must be called inside a running actix
    /// System.
    pub fn with_ownership(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: RegistryConfig,
        links: Links,
        ownership: Arc<Ownership>,
        hooks: Hooks,
    ) -> Self {
        let arbiters = (0..config.arbiters.max(1))
            .map(|_| Arbiter::new())
            .collect();
        let registry = Registry {
            inner: Arc::new(Inner {
                store,
                clock,
                config,
                arbiters,
                slots: Mutex::new(HashMap::new()),
                outbox: Arc::new(tokio::sync::Notify::new()),
                retention: Arc::new(tokio::sync::Notify::new()),
                attempts: Arc::default(),
                renders: RenderPool::new(config.render_threads, config.templates),
                wakeups: Wakeups::new(config.max_entries_per_day, Arc::default())
                    .with_ownership(ownership.clone()),
                links: Arc::new(links),
                drain: Arc::default(),
                faults: Arc::new(Faults::from_env()),
                ownership,
                moves: Mutex::default(),
                resumes: Mutex::default(),
                paces: Mutex::default(),
                hooks: Arc::new(hooks),
            }),
        };
        if !registry.inner.ownership.is_everything() {
            registry.watch_fences();
        }
        registry
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<ProjectId, Slot>> {
        self.inner.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn slot_in(&self, slots: &mut HashMap<ProjectId, Slot>, project: ProjectId) -> Slot {
        slots
            .entry(project)
            .or_insert_with(|| {
                let arbiter = self.arbiter_for(project);
                let shared = ActorShared {
                    store: self.inner.store.clone(),
                    clock: self.inner.clock.clone(),
                    mailbox_capacity: self.inner.config.mailbox_capacity,
                    outbox: self.inner.outbox.clone(),
                    limits: self.inner.config.tenant,
                    wakeups: self.inner.wakeups.for_actor(),
                    hooks: self.inner.hooks.clone(),
                    faults: self.inner.faults.clone(),
                };
                let table = Arc::new(ContactTable::default());
                let actor_table = table.clone();
                let addr = Supervisor::start_in_arbiter(&arbiter, move |_| {
                    ProjectActor::new(project, shared, actor_table)
                });
                Slot {
                    addr,
                    depth: Arc::new(AtomicUsize::new(0)),
                    table,
                }
            })
            .clone()
    }

    fn arbiter_for(&self, project: ProjectId) -> ArbiterHandle {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        project.hash(&mut h);
        let i = (h.finish() as usize) % self.inner.arbiters.len();
        self.inner.arbiters[i].handle()
    }

    /// Sends a message to the project's actor and waits for its answer.
    pub async fn send<M, R>(&self, project: ProjectId, msg: M) -> Result<R>
    where
        M: Message<Result = Result<R>> + Send + 'static,
        R: Send + 'static,
        ProjectActor: Handler<M>,
        <ProjectActor as Actor>::Context: ToEnvelope<ProjectActor, M>,
    {
        self.call(project, msg).await?
    }

    /// Like `send`, for messages whose answer is not a `Result`.
    pub async fn call<M>(&self, project: ProjectId, msg: M) -> Result<M::Result>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ProjectActor: Handler<M>,
        <ProjectActor as Actor>::Context: ToEnvelope<ProjectActor, M>,
    {
        self.call_if(project, msg, |o, p| o.owns(p)).await
    }

    /// Like `send`, for the outcome of work that was under way when the project's
    /// release began (an email the relay took): it passes while the project is held at
    /// all, and the store's fence decides whether the write lands.
    pub async fn send_held<M, R>(&self, project: ProjectId, msg: M) -> Result<R>
    where
        M: Message<Result = Result<R>> + Send + 'static,
        R: Send + 'static,
        ProjectActor: Handler<M>,
        <ProjectActor as Actor>::Context: ToEnvelope<ProjectActor, M>,
    {
        self.call_if(project, msg, |o, p| o.holds(p)).await?
    }

    async fn call_if<M>(
        &self,
        project: ProjectId,
        msg: M,
        admits: impl FnOnce(&Ownership, ProjectId) -> bool,
    ) -> Result<M::Result>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ProjectActor: Handler<M>,
    {
        let capacity = self.inner.config.mailbox_capacity;
        // Asked and counted under the slots' lock, which a release takes to begin: a
        // message let in before it is counted in the depth the release waits on.
        let slot = {
            let mut slots = self.slots();
            if !admits(&self.inner.ownership, project) {
                return Err(Error::NotOwner { project });
            }
            let slot = self.slot_in(&mut slots, project);
            if slot.depth.fetch_add(1, Ordering::AcqRel) >= capacity {
                slot.depth.fetch_sub(1, Ordering::AcqRel);
                return Err(Error::Busy {
                    retry_after_secs: 1,
                });
            }
            slot
        };
        let _in_flight = InFlight(slot.depth.clone());
        slot.addr
            .send::<Guarded<M>>(Guarded(msg))
            .await
            .map_err(|e| Error::Internal(format!("project actor unavailable: {e}")))?
    }

    /// The project's in-memory contacts (starting its actor if needed). A reader calls
    /// `ensure_loaded` before use (or takes `loaded_contacts`): the actor may not have
    /// loaded it yet. A project not
    /// held here gets a table of its own that starts no actor.
    pub fn contacts(&self, project: ProjectId) -> Arc<ContactTable> {
        let mut slots = self.slots();
        if !self.inner.ownership.holds(project) {
            return match slots.get(&project) {
                Some(slot) => slot.table.clone(),
                None => Arc::default(),
            };
        }
        self.slot_in(&mut slots, project).table
    }

    /// The project's in-memory contacts, read from the store first (on the render pool)
    /// when nobody has yet: what a reader outside the project's actor uses, since the
    /// actor of a project this node just took may not have read them yet, and an
    /// unloaded table finds no one.
    pub async fn loaded_contacts(&self, project: ProjectId) -> Result<Arc<ContactTable>> {
        let table = self.contacts(project);
        if table.is_loaded() {
            return Ok(table);
        }
        let (store, loading) = (self.inner.store.clone(), table.clone());
        self.renders()
            .run(move || loading.ensure_loaded(&*store, project))
            .await??;
        Ok(table)
    }

    /// Messages waiting for or being handled by each live project actor.
    pub fn mailbox_depths(&self) -> Vec<(ProjectId, usize)> {
        let slots = self.inner.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .map(|(id, s)| (*id, s.depth.load(Ordering::Acquire)))
            .collect()
    }

    /// Which projects this node may run work for.
    pub fn ownership(&self) -> &Arc<Ownership> {
        &self.inner.ownership
    }

    /// Registers what a feature resumes of a project this node takes (`acquire`).
    pub fn on_acquire(&self, resume: Resume) {
        self.inner
            .resumes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(resume);
    }

    /// Hands `pace`'s state of each project over with the project: written to the store
    /// when this node releases it, read by the node that acquires it next. `name` keys
    /// it (`sending`, `api`, ...).
    pub fn carry_pace(&self, name: &str, pace: Arc<crate::pace::Pace>) {
        self.inner
            .paces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((name.to_owned(), pace));
    }

    fn paces(&self) -> Vec<(String, Arc<crate::pace::Pace>)> {
        self.inner
            .paces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Writes where each carried pace of `p` stands (made durable with the release's
    /// other writes, under the fence still held), and forgets it here.
    fn hand_over_paces(&self, p: ProjectId) -> Result<Applied> {
        let mut batch = crate::store::Batch::new();
        for (name, pace) in self.paces() {
            if let Some(tat) = pace.export(p) {
                batch.put(keys::pace(p, &name), tat.to_be_bytes().to_vec());
            }
            pace.forget(p);
        }
        if batch.is_empty() {
            return Ok(Default::default());
        }
        self.inner.store.apply(batch)
    }

    /// Starts each carried pace of `p` where its last owner left it.
    fn take_paces(&self, p: ProjectId) {
        for (name, pace) in self.paces() {
            let stored = self.inner.store.get(&keys::pace(p, &name));
            if let Ok(Some(bytes)) = stored {
                if let Ok(raw) = <[u8; 8]>::try_from(bytes.as_slice()) {
                    pace.seed(p, i64::from_be_bytes(raw));
                }
            }
        }
    }

    fn move_lock(&self, p: ProjectId) -> Arc<tokio::sync::Mutex<()>> {
        let mut moves = self.inner.moves.lock().unwrap_or_else(|p| p.into_inner());
        moves.entry(p).or_default().clone()
    }

    /// Takes project `p` under lease `epoch` for `valid_for` (the time the lease is sure
    /// to be ours, measured from before the database granted it): fences the store's
    /// writes of `p` with the epoch, loads the project (off the actor threads), then
    /// serves it and resumes its background work here: its durable timers, its
    /// SENDING campaigns, erasures and imports (`on_acquire`), its ready workflow
    /// executions and its outbox. Holding `p` already under the same epoch only moves
    /// the deadline; under another, the project is released and loaded afresh (another
    /// node may have written it in between).
    pub async fn acquire(&self, p: ProjectId, epoch: u64, valid_for: Duration) -> Result<()> {
        let lock = self.move_lock(p);
        let _one = lock.lock().await;
        let ownership = &self.inner.ownership;
        if ownership.is_everything() {
            return Ok(());
        }
        match ownership.epoch(p) {
            Some(held) if held == epoch => {
                if self.renew(p, valid_for) {
                    return Ok(());
                }
                // Being released (a lost fence): let that finish, then take it again.
                self.release_locked(p).await?;
            }
            Some(_) => self.release_locked(p).await?,
            None => {}
        }
        let started = std::time::Instant::now();
        let store = self.inner.store.clone();
        store.set_fence(p, Some(epoch));
        let loaded = tokio::task::spawn_blocking(move || store.load_project(p))
            .await
            .map_err(|e| Error::Internal(format!("loading a project: {e}")))
            .and_then(|r| r);
        if let Err(e) = loaded {
            self.inner.store.set_fence(p, None);
            return Err(e);
        }
        self.take_paces(p);
        // The time spent loading came off the lease.
        ownership.hold(p, epoch, valid_for.saturating_sub(started.elapsed()));
        self.resume(p);
        tracing::info!(project = %p, epoch, ms = started.elapsed().as_millis() as u64, "project acquired");
        Ok(())
    }

    /// Moves `p`'s local deadline to `valid_for` from now (a renewed lease); false when
    /// `p` is not held and serving here.
    pub fn renew(&self, p: ProjectId, valid_for: Duration) -> bool {
        let lapsed = !self.inner.ownership.owns(p);
        let renewed = self.inner.ownership.renew(p, valid_for);
        if renewed && lapsed {
            // The deadline had passed (a late renewal, a pause): the background work
            // that stopped then starts again.
            tracing::warn!(project = %p, "a project's lease was renewed after its local deadline; resuming its work");
            self.resume(p);
        }
        renewed
    }

    /// Hands project `p` over: from now on its messages are refused with
    /// `Error::NotOwner` and nothing new of it starts here (no email to a mailer, no
    /// timer, no campaign batch, no workflow step); the work under way finishes (an
    /// email in its SMTP transaction has its outcome written; one still waiting for the
    /// relay goes back to the outbox unsent), its actor's mailbox empties, its
    /// writes are made durable, and the store forgets it (fence cleared, keys
    /// unloaded). Not holding `p` is not an error.
    pub async fn release(&self, p: ProjectId) -> Result<()> {
        let lock = self.move_lock(p);
        let guard = lock.lock().await;
        let released = self.release_locked(p).await;
        drop(guard);
        drop(lock);
        self.prune_move_lock(p);
        released
    }

    /// Forgets `p`'s move lock once nobody holds or waits for it, so that the map stays
    /// as large as the projects moving now, not every project this node ever held.
    fn prune_move_lock(&self, p: ProjectId) {
        let mut moves = self.inner.moves.lock().unwrap_or_else(|p| p.into_inner());
        // Clones are made only under this map's lock: a count of one (the map's own) now
        // means no task holds or awaits it.
        if moves.get(&p).is_some_and(|l| Arc::strong_count(l) == 1) {
            moves.remove(&p);
        }
    }

    async fn release_locked(&self, p: ProjectId) -> Result<()> {
        if self.inner.ownership.is_everything() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let wait = {
            let _slots = self.slots();
            self.inner.ownership.begin_release(p)
        };
        let Some(wait) = wait else {
            return Ok(());
        };
        let left = wait.idle(RELEASE_WAIT).await;
        if left > 0 {
            tracing::error!(project = %p, under_way = left, "releasing a project with work still under way; an email of it may go out twice");
        }
        self.mailbox_empty(p).await;
        {
            // Together: once the actor is gone nothing may start a new one for `p`
            // (`send_held` and `contacts` admit a project being released).
            let mut slots = self.slots();
            slots.remove(&p);
            self.inner.ownership.forget(p);
        }
        self.inner.wakeups.timers().forget(p);
        let paces = self.hand_over_paces(p).unwrap_or_else(|e| {
            tracing::warn!(project = %p, error = %e, "writing a project's paces for its next owner");
            Default::default()
        });
        // Everything of `p`: the paces, and whatever of the actor's writes nobody waited
        // for (`Apply::applied`, or a message still running when `mailbox_empty` gave
        // up). A drop of another project's writes does not fail the release.
        let durable = self
            .inner
            .store
            .durable_after(Applied::touching(p).and(paces))
            .await;
        self.inner.store.set_fence(p, None);
        self.inner.store.unload_project(p);
        tracing::info!(project = %p, ms = started.elapsed().as_millis() as u64, "project released");
        durable
    }

    /// Waits (up to `RELEASE_WAIT`) until no message to `p`'s actor is in flight: each
    /// answers once its write is durable, so its effects are then in the store.
    async fn mailbox_empty(&self, p: ProjectId) {
        let Some(depth) = self.slots().get(&p).map(|s| s.depth.clone()) else {
            return;
        };
        let deadline = std::time::Instant::now() + RELEASE_WAIT;
        while depth.load(Ordering::Acquire) > 0 {
            if std::time::Instant::now() >= deadline {
                tracing::error!(project = %p, "a project's actor still has messages in flight at its release");
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// What this node resumes of a project it takes: timers, ready executions, the
    /// outbox, and what the features registered (`on_acquire`).
    fn resume(&self, p: ProjectId) {
        let store = &*self.inner.store;
        match crate::scheduler::load_timers(store, self.timers(), Some(p)) {
            Ok(n) if n > 0 => tracing::info!(project = %p, timers = n, "timers resume"),
            Ok(_) => {}
            Err(e) => tracing::error!(project = %p, error = %e, "loading a project's timers"),
        }
        let ready: Vec<_> = store
            .scan(&keys::with_id(keys::READY, p.as_bytes()), None, false)
            .filter_map(|kv| kv.ok().and_then(|(k, _)| keys::parse_ready(&k)))
            .collect();
        self.inner.wakeups.ready().hint(&ready);
        self.inner.outbox.notify_one();
        let resumes = self
            .inner
            .resumes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for resume in resumes {
            resume(self, p);
        }
    }

    /// Releases locally what the store finds another node took (a commit whose fence
    /// broke): the hook runs on the store's thread, the release on an arbiter.
    fn watch_fences(&self) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let arbiter = self.inner.arbiters[0].handle();
        self.inner.store.on_fence_lost(Arc::new(move |p| {
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let registry = Registry { inner };
            // Stop starting work at once, under the epoch that was lost: an acquire
            // under a newer one before the release below runs must not be undone by it.
            let lost = {
                let _slots = registry.slots();
                let epoch = registry.inner.ownership.epoch(p);
                if epoch.is_some() {
                    registry.inner.ownership.begin_release(p);
                }
                epoch
            };
            let Some(epoch) = lost else {
                return;
            };
            tracing::warn!(project = %p, epoch, "another node holds this project's lease now; releasing it here");
            arbiter.spawn(async move {
                let lock = registry.move_lock(p);
                let _one = lock.lock().await;
                if registry.inner.ownership.epoch(p) != Some(epoch) {
                    return;
                }
                if let Err(e) = registry.release_locked(p).await {
                    tracing::warn!(project = %p, error = %e, "releasing a project whose fence broke");
                }
            });
        }));
    }

    /// Rung whenever emails were durably queued.
    pub fn outbox_signal(&self) -> Arc<tokio::sync::Notify> {
        self.inner.outbox.clone()
    }

    /// Rung when the clock moved: the retention purge runs now (`retention::Purger`).
    pub fn retention_signal(&self) -> Arc<tokio::sync::Notify> {
        self.inner.retention.clone()
    }

    /// The emails in an SMTP attempt right now.
    pub fn attempts(&self) -> &Arc<Attempts> {
        &self.inner.attempts
    }

    pub fn faults(&self) -> &Arc<Faults> {
        &self.inner.faults
    }

    pub fn drain(&self) -> &Arc<Drain> {
        &self.inner.drain
    }

    pub fn timers(&self) -> &Arc<Timers> {
        self.inner.wakeups.timers()
    }

    /// Where writes start and wake workflow executions (the re-entry cap, the timers,
    /// the executors' wake-up).
    pub fn wakeups(&self) -> &Wakeups {
        &self.inner.wakeups
    }

    /// The engine's counters: this engine's work only.
    pub fn metrics(&self) -> &Arc<Metrics> {
        self.inner.wakeups.metrics()
    }

    /// Records one slice of a contact's erasure handles (config `erasure.slice`).
    pub fn erasure_slice(&self) -> usize {
        self.inner.config.erasure_slice.max(1)
    }

    /// Rows one slice of a contact import applies (config `limits.import_slice_rows`).
    pub fn import_slice_rows(&self) -> usize {
        self.inner.config.import_slice_rows.max(1)
    }

    /// The links of marketing mail: the server's key and where they point.
    pub fn links(&self) -> &Arc<Links> {
        &self.inner.links
    }

    pub fn renders(&self) -> &RenderPool {
        &self.inner.renders
    }

    /// What one project may hold and spend (config section `limits`).
    pub fn tenant(&self) -> super::TenantLimits {
        self.inner.config.tenant
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contact::records::{self as contacts, UpsertContact, UpsertOutcome};
    use crate::model::{DataPatch, EmailAddress};
    use crate::project::apply::Apply;
    use crate::project::messages::{Generation, Restart};
    use crate::store::SledStore;
    use crate::SystemClock;

    /// A write as `contact::actions::upsert` sends it.
    fn upsert(email: &str) -> Apply<UpsertOutcome> {
        let req = UpsertContact {
            email: EmailAddress::parse(email).unwrap(),
            subscribed: None,
            default_subscribed: true,
            data: DataPatch::default(),
        };
        Apply::durable(move |ctx, counts| contacts::upsert(ctx, counts, req))
    }

    #[actix::test]
    async fn a_stopped_project_actor_is_restarted_and_reloads_its_counters() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let reg = Registry::new(
            store.clone(),
            Arc::new(SystemClock),
            RegistryConfig {
                mailbox_capacity: 16,
                ..Default::default()
            },
            crate::links::Links::for_tests(),
            crate::wiring::hooks(),
        );
        let p = ProjectId::new();
        reg.send(p, upsert("a@example.com")).await.unwrap();
        assert_eq!(reg.call(p, Generation).await.unwrap(), 1);
        reg.call(p, Restart).await.unwrap();
        let out = reg.send(p, upsert("b@example.com")).await.unwrap();
        assert!(out.is_new);
        let again = reg.send(p, upsert("a@example.com")).await.unwrap();
        assert!(
            !again.is_new,
            "the restarted actor reloaded its contacts from the store"
        );
        assert_eq!(reg.contacts(p).len(), 2);
        assert_eq!(reg.call(p, Generation).await.unwrap(), 2, "restarted once");
        let total = crate::contact::records::read_counter(&*store, p, "contacts").unwrap();
        assert_eq!(
            total, 2,
            "the restarted actor continued from the stored count"
        );
    }

    #[actix::test]
    async fn a_release_refuses_new_messages_but_waits_for_and_admits_the_work_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let reg = Registry::with_ownership(
            store,
            Arc::new(SystemClock),
            RegistryConfig::default(),
            crate::links::Links::for_tests(),
            Ownership::none(),
            crate::wiring::hooks(),
        );
        let p = ProjectId::new();
        assert!(matches!(
            reg.send(p, upsert("a@example.com")).await,
            Err(Error::NotOwner { project }) if project == p
        ));
        reg.acquire(p, 1, Duration::from_secs(60)).await.unwrap();
        reg.send(p, upsert("a@example.com")).await.unwrap();
        // An email with a mailer, say: it holds the project's work gate.
        let working = reg.ownership().enter(p).expect("owned");
        let releasing = {
            let reg = reg.clone();
            actix::spawn(async move { reg.release(p).await })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while reg.ownership().owns(p) {
            assert!(std::time::Instant::now() < deadline, "the release began");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(matches!(
            reg.send(p, upsert("new@example.com")).await,
            Err(Error::NotOwner { .. })
        ));
        let outcome = reg.send_held(p, upsert("outcome@example.com")).await;
        assert!(outcome.is_ok(), "the work under way writes its outcome");
        assert!(!releasing.is_finished(), "the release waits for that work");
        drop(working);
        releasing.await.unwrap().unwrap();
        assert!(!reg.ownership().holds(p));
        assert!(matches!(
            reg.send_held(p, upsert("late@example.com")).await,
            Err(Error::NotOwner { .. })
        ));
    }

    #[actix::test]
    async fn concurrent_upserts_of_one_email_make_one_contact() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let reg = Registry::new(
            store.clone(),
            Arc::new(SystemClock),
            RegistryConfig {
                arbiters: 2,
                ..Default::default()
            },
            crate::links::Links::for_tests(),
            crate::wiring::hooks(),
        );
        let p = ProjectId::new();
        let sends = (0..50).map(|_| reg.send(p, upsert("same@example.com")));
        let outcomes = futures_util::future::join_all(sends).await;
        let new = outcomes
            .iter()
            .filter(|o| o.as_ref().unwrap().is_new)
            .count();
        assert_eq!(new, 1);
        let total = crate::contact::records::read_counter(&*store, p, "contacts").unwrap();
        assert_eq!(total, 1);
    }

    #[actix::test]
    async fn two_registries_in_one_process_each_keep_the_settings_they_were_built_with() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let build = |config: RegistryConfig| {
            Registry::new(
                store.clone(),
                Arc::new(SystemClock),
                config,
                crate::links::Links::for_tests(),
                crate::wiring::hooks(),
            )
        };
        let tight = build(RegistryConfig {
            max_entries_per_day: 2,
            erasure_slice: 10,
            import_slice_rows: 25,
            templates: crate::render::Limits {
                max_output_bytes: 64,
                ..Default::default()
            },
            ..Default::default()
        });
        let roomy = build(RegistryConfig::default());
        let body = "{% for i in range(end=20) %}<p>{{ i }}</p>{% endfor %}".to_owned();
        assert!(tight
            .renders()
            .compile("s".into(), body.clone())
            .await
            .is_err());
        assert!(roomy.renders().compile("s".into(), body).await.is_ok());
        let settings = |r: &Registry| {
            (
                r.wakeups().max_entries_per_day(),
                r.erasure_slice(),
                r.import_slice_rows(),
            )
        };
        assert_eq!(settings(&tight), (2, 10, 25));
        assert_eq!(settings(&roomy), (100, 1_000, 1_000));
        assert!(!Arc::ptr_eq(tight.timers(), roomy.timers()));
    }
}
