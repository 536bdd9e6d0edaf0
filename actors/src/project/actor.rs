//! The ProjectActor: applies a project's writes to the store in order, then answers
//! once they are durable. Waiting for the flush happens off the actor (the reply is a
//! future), so the actor keeps applying later writes while earlier ones are flushed.

use std::sync::Arc;

use actix::{Actor, ActorContext, Context, Handler, ResponseFuture, Supervised};

use super::counters::read_counter;
use super::counters::Counts;
use super::limits::{self, TenantLimits};
use super::membership::Audience;
use super::messages::{
    ApplyDomainCheck, ChangeMembers, CreateDomain, CreateSegment, CreateTemplate, DeleteDomain,
    DeleteSegment, DeleteTemplate, Generation, MembersOutcome, PatchContact, QueueEmails,
    RecordDelivery, Restart, Track, TrackOutcome, TrustDomain, UpdateSegment, UpdateTemplate,
    UpsertContact, UpsertOutcome,
};
use super::starts::Starts;
use super::table::ContactTable;
use super::write::WriteCtx;
use crate::clock::Clock;
use crate::contact::records as contacts;
use crate::domain::{self, Domain};
use crate::email::sending;
use crate::error::Result;
use crate::event::track;
use crate::model::{Contact, ProjectId, Template, Timestamp};
use crate::segment::records as segments;
use crate::segment::Segment;
use crate::store::{keys, Store};
use crate::template::records as templates;

pub struct ProjectActor {
    limits: TenantLimits,
    starts: Starts,
    project: ProjectId,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mailbox_capacity: usize,
    counts: Counts,
    /// The project's segments, filters compiled, for membership tracking.
    audience: Audience,
    /// The project's contacts in memory, shared with readers through the registry.
    table: Arc<ContactTable>,
    generation: u64,
    outbox: Arc<tokio::sync::Notify>,
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
    pub starts: Starts,
}

impl ProjectActor {
    pub fn new(project: ProjectId, shared: ActorShared, table: Arc<ContactTable>) -> Self {
        let ActorShared {
            store,
            clock,
            mailbox_capacity,
            outbox,
            limits,
            starts,
        } = shared;
        ProjectActor {
            limits,
            starts,
            project,
            store,
            clock,
            mailbox_capacity,
            counts: Counts::default(),
            audience: Audience::default(),
            table,
            generation: 0,
            outbox,
        }
    }

    fn now(&self) -> Timestamp {
        Timestamp::from(self.clock.now())
    }

    fn load(&mut self) {
        self.generation += 1;
        match Counts::load(&*self.store, self.project) {
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
        match Audience::load(&*self.store, self.project) {
            Ok(a) => self.audience = a,
            Err(e) => {
                tracing::error!(project = %self.project, error = %e, "loading project segments")
            }
        }
    }

    fn check_domain_room(&self) -> Result<()> {
        let max = self.limits.max_domains;
        check_room(&*self.store, &keys::domains(self.project), max, "domains")
    }

    /// Whether one more segment (`new`) or one more tracked segment fits the limits.
    fn check_segment_room(&self, new: bool, tracked: bool) -> Result<()> {
        let l = &self.limits;
        if new
            && read_counter(&*self.store, self.project, segments::SEGMENTS_COUNTER)?
                >= l.max_segments
        {
            return Err(limits::full("segments", l.max_segments, "max_segments"));
        }
        if tracked && self.audience.tracked_count() >= l.max_tracked_segments {
            return Err(limits::full(
                "tracked segments",
                l.max_tracked_segments as u64,
                "max_tracked_segments",
            ));
        }
        Ok(())
    }

    /// Splits the actor's state into the write context and the counters it updates.
    fn ctx(&mut self) -> (WriteCtx<'_>, &mut Counts) {
        let now = self.now();
        (
            WriteCtx {
                store: &*self.store,
                project: self.project,
                audience: &self.audience,
                table: &self.table,
                now,
                limits: &self.limits,
                starts: &self.starts,
            },
            &mut self.counts,
        )
    }

    /// Turns an applied write into a reply that resolves when it is durable.
    fn after_flush<T: Send + 'static>(&self, result: Result<T>) -> ResponseFuture<Result<T>> {
        let durable = self.store.durable();
        Box::pin(async move {
            let value = result?;
            durable.await?;
            Ok(value)
        })
    }
}

impl Actor for ProjectActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(self.mailbox_capacity);
        self.load();
        tracing::debug!(project = %self.project, generation = self.generation, "project actor started");
    }
}

impl Supervised for ProjectActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(project = %self.project, "project actor restarting; reloading from the store");
    }
}

impl Handler<UpsertContact> for ProjectActor {
    type Result = ResponseFuture<Result<UpsertOutcome>>;

    fn handle(&mut self, msg: UpsertContact, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = contacts::upsert(&ctx, counts, msg);
        self.after_flush(result)
    }
}

impl Handler<PatchContact> for ProjectActor {
    type Result = ResponseFuture<Result<Contact>>;

    fn handle(&mut self, msg: PatchContact, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = contacts::patch(&ctx, counts, msg);
        self.after_flush(result)
    }
}

impl Handler<Track> for ProjectActor {
    type Result = ResponseFuture<Result<TrackOutcome>>;

    fn handle(&mut self, msg: Track, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = track::track(&ctx, counts, msg);
        self.after_flush(result)
    }
}

impl Handler<CreateSegment> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, msg: CreateSegment, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result = self
            .check_segment_room(true, msg.track_membership)
            .and_then(|()| {
                segments::create(&*self.store, self.project, now, &mut self.audience, msg)
            });
        self.after_flush(result)
    }
}

impl Handler<UpdateSegment> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, msg: UpdateSegment, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let starts_tracking = msg.track_membership == Some(true)
            && self
                .audience
                .get(msg.id)
                .is_some_and(|e| !e.segment.track_membership);
        let result = self
            .check_segment_room(false, starts_tracking)
            .and_then(|()| {
                segments::update(
                    &*self.store,
                    &self.starts,
                    self.project,
                    now,
                    &mut self.audience,
                    msg,
                )
            });
        self.after_flush(result)
    }
}

impl Handler<DeleteSegment> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteSegment, _ctx: &mut Self::Context) -> Self::Result {
        let result = segments::delete(&*self.store, self.project, &mut self.audience, msg.id);
        self.after_flush(result)
    }
}

impl Handler<ChangeMembers> for ProjectActor {
    type Result = ResponseFuture<Result<MembersOutcome>>;

    fn handle(&mut self, msg: ChangeMembers, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, _) = self.ctx();
        let result = segments::change_members(&ctx, msg.id, &msg.emails, msg.add);
        self.after_flush(result)
    }
}

impl Handler<CreateDomain> for ProjectActor {
    type Result = ResponseFuture<Result<Domain>>;

    fn handle(&mut self, msg: CreateDomain, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result = self
            .check_domain_room()
            .and_then(|()| domain::writes::create(&*self.store, self.project, msg, now));
        self.after_flush(result)
    }
}

impl Handler<TrustDomain> for ProjectActor {
    type Result = ResponseFuture<Result<Domain>>;

    fn handle(&mut self, msg: TrustDomain, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let (store, p) = (&*self.store, self.project);
        let result = domain::queries::find_by_name(store, p, msg.0.name.as_str())
            .and_then(|found| match found {
                Some(_) => Ok(()),
                None => self.check_domain_room(),
            })
            .and_then(|()| domain::writes::trust(store, p, msg.0, now));
        self.after_flush(result)
    }
}

impl Handler<DeleteDomain> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteDomain, _ctx: &mut Self::Context) -> Self::Result {
        let result = domain::writes::delete(&*self.store, self.project, msg.id);
        self.after_flush(result)
    }
}

impl Handler<ApplyDomainCheck> for ProjectActor {
    type Result = ResponseFuture<Result<Domain>>;

    fn handle(&mut self, msg: ApplyDomainCheck, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result =
            domain::writes::apply_check(&*self.store, self.project, msg.id, msg.check, now);
        self.after_flush(result)
    }
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

impl Handler<CreateTemplate> for ProjectActor {
    type Result = ResponseFuture<Result<Template>>;

    fn handle(&mut self, msg: CreateTemplate, _ctx: &mut Self::Context) -> Self::Result {
        let max = self.limits.max_templates;
        let result = check_room(
            &*self.store,
            &keys::templates(self.project),
            max,
            "templates",
        )
        .and_then(|()| templates::create(&*self.store, self.project, msg.0));
        self.after_flush(result)
    }
}

impl Handler<UpdateTemplate> for ProjectActor {
    type Result = ResponseFuture<Result<Template>>;

    fn handle(&mut self, msg: UpdateTemplate, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result = templates::update(&*self.store, self.project, msg, now);
        self.after_flush(result)
    }
}

impl Handler<DeleteTemplate> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteTemplate, _ctx: &mut Self::Context) -> Self::Result {
        let result = templates::delete(&*self.store, self.project, msg.id);
        self.after_flush(result)
    }
}

impl Handler<QueueEmails> for ProjectActor {
    type Result = ResponseFuture<Result<sending::Queued>>;

    fn handle(&mut self, msg: QueueEmails, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = sending::queue(&ctx, counts, msg.spec, msg.rendered);
        let reply = self.after_flush(result);
        let outbox = self.outbox.clone();
        Box::pin(async move {
            let queued = reply.await?;
            // Only durable entries are announced, so the dispatcher never sends one
            // that a crash could still take back.
            if matches!(queued, sending::Queued::Done(_)) {
                outbox.notify_one();
            }
            Ok(queued)
        })
    }
}

/// Delivery outcomes need not wait for a flush: losing one in a crash only means the
/// email is tried again, which the contract allows for emails in flight at a crash.
impl Handler<RecordDelivery> for ProjectActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: RecordDelivery, _ctx: &mut Self::Context) -> Result<()> {
        let (ctx, counts) = self.ctx();
        let result = sending::record(&ctx, counts, msg);
        // Nobody waits for this write, but it should reach the log soon: asking for a
        // flush (and dropping the wait) schedules one.
        drop(self.store.durable());
        result
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
        drop(self.store.durable());
        Box::pin(async move { result })
    }
}

/// Whether one more record fits under `prefix`, where `limits.max_<what>` allows `max`
/// (counting stops at `max`: a limit check needs no more).
fn check_room(store: &dyn Store, prefix: &[u8], max: usize, what: &str) -> Result<()> {
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
