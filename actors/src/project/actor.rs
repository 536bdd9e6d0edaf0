//! The ProjectActor: applies a project's writes to the store in order, then answers
//! once they are durable. Waiting for the flush happens off the actor (the reply is a
//! future), so the actor keeps applying later writes while earlier ones are flushed.
//! The actor knows no feature: each feature's messages are handled in its own folder
//! (`impl Handler<CreateCampaign> for ProjectActor` sits with the campaign), through the
//! write context (`ctx`) and the reply that waits for the flush (`after_flush`).

use std::sync::Arc;

use actix::dev::MessageResponse;
use actix::{
    Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Handler, Message, ResponseFuture,
    Supervised,
};

use super::counters::ProjectCounts;
use super::hooks::{Hooks, States};
use super::limits::{self, TenantLimits};
use super::messages::{Generation, Restart};
use super::recorder::Recorder;
use super::table::ContactTable;
use super::wakeups::Wakeups;
use super::write::WriteCtx;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::faults::{Faults, Point};
use crate::model::{ProjectId, Timestamp};
use crate::store::Store;

pub struct ProjectActor {
    pub(crate) limits: TenantLimits,
    pub(crate) wakeups: Wakeups,
    pub(crate) project: ProjectId,
    /// The store, noting what the actor's messages apply: the writes its next wait is
    /// for (`after_flush`, `flush_soon`).
    pub(crate) store: Arc<Recorder>,
    clock: Arc<dyn Clock>,
    mailbox_capacity: usize,
    counts: ProjectCounts,
    /// The features' states (the segments, filters compiled), which judge each contact
    /// write; each feature's handlers reach its own by type.
    pub(crate) states: States,
    /// The project's contacts in memory, shared with readers through the registry.
    table: Arc<ContactTable>,
    generation: u64,
    pub(crate) outbox: Arc<tokio::sync::Notify>,
    hooks: Arc<Hooks>,
    faults: Arc<Faults>,
    /// Panics in a row, each within PANIC_WINDOW of the last (kept across restarts:
    /// the supervisor restarts this same value), and when the last one was.
    panics: u32,
    last_panic: Option<std::time::Instant>,
    /// The latest time a write of this project was given (ms): the actor's time never
    /// goes back, so the event log's ids only grow (a clock stepped back, or a node
    /// behind the one that held the project before, would put new events below ones
    /// already there, where the webhook deliverer's walk has passed).
    latest: std::cell::Cell<i64>,
}

/// Panics further apart than this start the count again.
const PANIC_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);
/// The longest wait before a project whose actor keeps panicking is loaded again.
const RELOAD_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a restart after `panics` panics in a row waits before it reloads the
/// project: none after the first, then 200 ms, 400 ms, ... up to RELOAD_WAIT_MAX. A
/// request that panics every time then reloads its project (every contact, on an
/// arbiter other projects share) a few times a minute, not once per request.
fn reload_wait(panics: u32) -> std::time::Duration {
    crate::backoff::doubling(
        std::time::Duration::from_millis(200),
        panics.saturating_sub(1),
        RELOAD_WAIT_MAX,
    )
}

/// What every project's actor gets from the Registry, the same for all of them.
#[derive(Clone)]
pub struct ActorShared {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub mailbox_capacity: usize,
    /// Rung when emails were queued, to wake the dispatcher.
    pub outbox: Arc<tokio::sync::Notify>,
    pub limits: TenantLimits,
    pub wakeups: Wakeups,
    /// What the features do inside each write (wired by `crate::wiring`).
    pub hooks: Arc<Hooks>,
    /// Test faults (debug builds only).
    pub faults: Arc<Faults>,
}

impl ProjectActor {
    pub fn new(project: ProjectId, shared: ActorShared, table: Arc<ContactTable>) -> Self {
        let ActorShared {
            store,
            clock,
            mailbox_capacity,
            outbox,
            limits,
            wakeups,
            hooks,
            faults,
        } = shared;
        ProjectActor {
            limits,
            wakeups,
            project,
            store: Arc::new(Recorder::new(store)),
            clock,
            mailbox_capacity,
            counts: ProjectCounts::default(),
            states: hooks.new_states(),
            table,
            generation: 0,
            outbox,
            hooks,
            faults,
            panics: 0,
            last_panic: None,
            latest: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        let now = Timestamp::from(self.clock.now())
            .millis()
            .max(self.latest.get());
        self.latest.set(now);
        Timestamp::from(now)
    }

    fn load(&mut self) {
        self.generation += 1;
        match ProjectCounts::load(&*self.store, self.project) {
            Ok(c) => self.counts = c,
            Err(e) => {
                tracing::error!(project = %self.project, error = %e, "loading project counters")
            }
        }
        // A restart promises a reload from the store; a first start only loads the
        // table if no reader has loaded it already.
        let table = if self.generation > 1 {
            self.table.reload(&*self.store, self.project)
        } else {
            self.table.ensure_loaded(&*self.store, self.project)
        };
        if let Err(e) = table {
            tracing::error!(project = %self.project, error = %e, "loading project contacts")
        }
        self.states.load(&*self.store, self.project);
        // The newest event's time: the floor of this actor's time.
        let newest = crate::store::blocks::iter_rev(
            &*self.store,
            &crate::store::keys::events(self.project),
            None,
        )
        .next();
        match newest {
            Some(Ok((id, _))) => {
                use crate::id::KeyId;
                let at = crate::model::EventId::from_key_bytes(id).millis();
                self.latest.set(self.latest.get().max(at));
            }
            Some(Err(e)) => {
                tracing::error!(project = %self.project, error = %e, "reading the newest event")
            }
            None => {}
        }
    }

    /// Splits the actor's state into the write context and the counters it updates.
    pub(crate) fn ctx(&mut self) -> (WriteCtx<'_>, &mut ProjectCounts) {
        self.faults.hit(Point::ProjectWrite);
        let now = self.now();
        (
            WriteCtx {
                store: &*self.store,
                project: self.project,
                states: &self.states,
                table: &self.table,
                now,
                limits: &self.limits,
                wakeups: &self.wakeups,
                metrics: self.wakeups.metrics(),
                hooks: &self.hooks,
            },
            &mut self.counts,
        )
    }

    /// Turns an applied write into a reply that resolves when it is durable, waking
    /// what the write noted then (the one place timers of writes are armed).
    pub(crate) fn after_flush<T: Send + 'static>(
        &self,
        result: Result<T>,
    ) -> ResponseFuture<Result<T>> {
        let durable = self.store.durable_for_mine();
        let noted = self.wakeups.take_noted();
        let wakeups = self.wakeups.clone();
        Box::pin(async move {
            if result.is_err() && noted.is_empty() {
                return result;
            }
            // A failed flush arms nothing: what did reach the store is loaded at the
            // next start, like every timer (and walked at the dispatcher's next sweep).
            durable.await?;
            wakeups.wake(noted);
            result
        })
    }

    /// For a write nobody waits on: asks for a flush, and wakes what it noted once it
    /// is done.
    pub(crate) fn flush_soon(&self) {
        let noted = self.wakeups.take_noted();
        if noted.is_empty() {
            // Nobody waits: ask for a flush, and leave what was applied to the next wait
            // (or the release's), which then fails if these writes were dropped.
            drop(self.store.durable());
            return;
        }
        let durable = self.store.durable_for_mine();
        let wakeups = self.wakeups.clone();
        actix::spawn(async move {
            if durable.await.is_ok() {
                wakeups.wake(noted);
            }
        });
    }
}

impl Actor for ProjectActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        let wait = reload_wait(self.panics);
        if !wait.is_zero() {
            // Messages wait in the mailbox (up to its capacity, then 503) meanwhile.
            tracing::warn!(project = %self.project, panics = self.panics, ?wait, "a project actor that keeps panicking waits before it reloads");
            ctx.wait(
                actix::fut::wrap_future::<_, Self>(tokio::time::sleep(wait))
                    .map(|_, act, _| act.load()),
            );
            return;
        }
        self.load();
        tracing::debug!(project = %self.project, generation = self.generation, "project actor started");
    }
}

impl Supervised for ProjectActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        // `started` follows and reloads the counters, the contacts and the segments: a
        // handler that panicked may have left any of them half changed.
        tracing::warn!(project = %self.project, "project actor restarting; reloading from the store");
    }
}

/// Any message to a project's actor, as the Registry sends it: a panic in its handler
/// answers `Error::Internal` and restarts the actor (`Supervised`), instead of ending
/// its task and leaving every later message for the project unanswerable.
pub(crate) struct Guarded<M>(pub(crate) M);

impl<M: Message> Message for Guarded<M> {
    type Result = Result<M::Result>;
}

impl<M> Handler<Guarded<M>> for ProjectActor
where
    M: Message + Send + 'static,
    M::Result: Send,
    ProjectActor: Handler<M>,
{
    type Result = ResponseFuture<Result<M::Result>>;

    fn handle(&mut self, msg: Guarded<M>, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // The handler's own part runs here, on the actor; a future it answers runs as a
        // task of its own, whose panic drops `tx` (an internal error below) and leaves
        // the actor's state alone.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let response = <Self as Handler<M>>::handle(self, msg.0, ctx);
            response.handle(ctx, Some(tx));
        }));
        if ran.is_err() {
            let recent = self
                .last_panic
                .is_some_and(|at| at.elapsed() < PANIC_WINDOW);
            self.panics = if recent {
                self.panics.saturating_add(1)
            } else {
                1
            };
            self.last_panic = Some(std::time::Instant::now());
            tracing::error!(project = %self.project, panics = self.panics, "a project actor's handler panicked; the actor restarts from the store");
            ctx.stop();
            return Box::pin(async { Err(panicked()) });
        }
        Box::pin(async move { rx.await.map_err(|_| panicked()) })
    }
}

fn panicked() -> Error {
    Error::Internal("the project's actor failed while handling this request".into())
}

impl Handler<Restart> for ProjectActor {
    type Result = ();

    fn handle(&mut self, _msg: Restart, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Generation> for ProjectActor {
    type Result = u64;

    fn handle(&mut self, _msg: Generation, _ctx: &mut Self::Context) -> u64 {
        self.generation
    }
}

impl<T: Send + 'static> Handler<super::apply::Apply<T>> for ProjectActor {
    type Result = ResponseFuture<Result<T>>;

    fn handle(&mut self, msg: super::apply::Apply<T>, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = (msg.run)(&ctx, counts);
        if msg.durable {
            return self.after_flush(result);
        }
        self.flush_soon();
        Box::pin(async move { result })
    }
}

/// Whether one more record fits under `prefix`, where `limits.max_<what>` allows `max`
/// (counting stops at `max`: a limit check needs no more).
pub(crate) fn check_room(store: &dyn Store, prefix: &[u8], max: usize, what: &str) -> Result<()> {
    let mut n = 0;
    for kv in store.scan(prefix, None, false).take(max) {
        kv?;
        n += 1;
    }
    match n >= max {
        true => Err(limits::full(what, max as u64, &format!("max_{what}"))),
        false => Ok(()),
    }
}
