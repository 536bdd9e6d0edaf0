//! The features' part in the core's writes, turned around: the core calls these hooks
//! at fixed points of a write, the features implement them, and `crate::wiring` (the one
//! place that names the features) hands them to the Registry, which gives them to every
//! project actor. So the core names no feature, and the imports point from each feature
//! to the core, never back.
//!
//! A hook adds to the batch it is given and never applies one of its own: a message is
//! still one batch, applied once by whoever made it.

use std::any::Any;
use std::sync::Arc;

use super::wakeups::Wakeups;
use crate::error::{Error, Result};
use crate::model::{
    Contact, ContactId, Engagement, Event, Hit, OutboundEmail, ProjectId, Timestamp,
};
use crate::store::{Batch, Store};

/// After events are appended to a batch (the workflows they start or wake): gets the
/// same batch, and the events in the order they were appended.
pub type AfterEvents = fn(&EventsCtx, &mut Batch, &[Event]) -> Result<()>;

/// What an after-events hook reads: the write's store, project, the features' states
/// in the actor, and where the event path starts and wakes work.
pub struct EventsCtx<'a> {
    pub store: &'a dyn Store,
    pub project: ProjectId,
    pub states: &'a States,
    pub wakeups: &'a Wakeups,
}

/// When a contact is deleted, in its delete batch: what a feature keeps by the address
/// (the suppression list keeps only its hash).
pub type ContactDeleted = fn(&dyn Store, &mut Batch, ProjectId, &Contact) -> Result<()>;

/// What a feature keeps in each project's actor to judge the contact writes by (the
/// segments, filters compiled). The actor makes one of each kind when it is built and
/// loads it when it starts; the feature's own handlers reach it through `States`.
pub trait ProjectState: Any + Send {
    /// What it is, for the log.
    fn name(&self) -> &'static str;

    /// Reads the state from the store. On an error the state stays as it was.
    fn load(&mut self, store: &dyn Store, p: ProjectId) -> Result<()>;

    /// The events one contact write causes (a segment entered or left): `before` is the
    /// contact as stored (None when new), and `new_events` the events the write already
    /// holds, which count as triggered after it.
    fn after_contact_write(
        &self,
        store: &dyn Store,
        p: ProjectId,
        before: Option<&Contact>,
        after: &Contact,
        new_events: &[Event],
        now: Timestamp,
    ) -> Result<Vec<Event>>;

    /// Adds to `batch`, which deletes contact `c`, the deletion of what the feature
    /// keeps of it (its STATIC segment memberships).
    fn on_contact_delete(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        c: ContactId,
    ) -> Result<()>;
}

/// A feature's part in what becomes of emails once queued (a campaign counts its
/// emails' outcomes and first hits, ends with its last email, and calls off the retries
/// of a cancelled campaign's emails). The email feature calls it and names no other.
pub trait EmailWatch: Send + Sync {
    /// Whether `email` was called off since it was queued (its campaign cancelled): a
    /// retry then ends it instead.
    fn called_off(&self, store: &dyn Store, p: ProjectId, email: &OutboundEmail) -> Result<bool>;

    /// After `email` got its final status (`called_off`: it ended because it was), in
    /// the batch that records it.
    fn after_outcome(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        email: &OutboundEmail,
        called_off: bool,
        now: Timestamp,
    ) -> Result<()>;

    /// After `emails`, waiting in the outbox, were cancelled because their contact was
    /// erased (each now FAILED, never sent), in the batch that records it. All of one
    /// batch come at once: a batch cannot read its own writes, so a count kept per
    /// campaign must add them up before it writes.
    fn after_cancelled(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        emails: &[OutboundEmail],
        now: Timestamp,
    ) -> Result<()>;

    /// After an email's first open or first click, in the batch that records it.
    fn after_first_hit(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        engagement: &Engagement,
        hit: Hit,
    ) -> Result<()>;
}

/// The features' states in one project's actor.
pub struct States(Vec<Box<dyn ProjectState>>);

impl States {
    /// A feature's state, by its type; an error if `wiring` did not hook the feature in.
    pub fn get<T: ProjectState>(&self) -> Result<&T> {
        self.0
            .iter()
            .find_map(|s| (&**s as &dyn Any).downcast_ref::<T>())
            .ok_or_else(|| not_wired::<T>())
    }

    pub fn get_mut<T: ProjectState>(&mut self) -> Result<&mut T> {
        self.0
            .iter_mut()
            .find_map(|s| (&mut **s as &mut dyn Any).downcast_mut::<T>())
            .ok_or_else(|| not_wired::<T>())
    }

    /// Loads each state; one that fails is logged and keeps what it held.
    pub fn load(&mut self, store: &dyn Store, p: ProjectId) {
        for state in &mut self.0 {
            if let Err(e) = state.load(store, p) {
                tracing::error!(project = %p, error = %e, "loading project {}", state.name());
            }
        }
    }

    /// The events a contact write causes, from every state.
    pub fn after_contact_write(
        &self,
        store: &dyn Store,
        p: ProjectId,
        before: Option<&Contact>,
        after: &Contact,
        new_events: &[Event],
        now: Timestamp,
    ) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        for state in &self.0 {
            out.extend(state.after_contact_write(store, p, before, after, new_events, now)?);
        }
        Ok(out)
    }

    /// Adds to a contact's delete batch what every feature keeps of it.
    pub fn on_contact_delete(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        c: ContactId,
    ) -> Result<()> {
        for state in &self.0 {
            state.on_contact_delete(store, batch, p, c)?;
        }
        Ok(())
    }
}

fn not_wired<T>() -> Error {
    Error::Internal(format!(
        "{} is not hooked into this engine (see wiring::hooks)",
        std::any::type_name::<T>()
    ))
}

/// What the features do inside the core's writes. Empty (`Hooks::default()`), the core
/// runs alone: events are recorded and nothing reacts to them or to contact writes.
#[derive(Default)]
pub struct Hooks {
    after_events: Vec<AfterEvents>,
    states: Vec<fn() -> Box<dyn ProjectState>>,
    emails: Vec<Arc<dyn EmailWatch>>,
    contact_deleted: Vec<ContactDeleted>,
}

impl Hooks {
    pub fn after_events(mut self, hook: AfterEvents) -> Self {
        self.after_events.push(hook);
        self
    }

    /// A state each project's actor keeps: `make` builds it empty.
    pub fn state(mut self, make: fn() -> Box<dyn ProjectState>) -> Self {
        self.states.push(make);
        self
    }

    pub fn contact_deleted(mut self, hook: ContactDeleted) -> Self {
        self.contact_deleted.push(hook);
        self
    }

    /// Runs every contact-deleted hook on the contact's delete batch.
    pub fn run_contact_deleted(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        contact: &Contact,
    ) -> Result<()> {
        for hook in &self.contact_deleted {
            hook(store, batch, p, contact)?;
        }
        Ok(())
    }

    pub fn emails(mut self, watch: Arc<dyn EmailWatch>) -> Self {
        self.emails.push(watch);
        self
    }

    /// Whether any feature called `email` off.
    pub fn called_off(
        &self,
        store: &dyn Store,
        p: ProjectId,
        email: &OutboundEmail,
    ) -> Result<bool> {
        for watch in &self.emails {
            if watch.called_off(store, p, email)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Tells every feature of an email's final outcome, in its batch.
    pub fn after_outcome(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        email: &OutboundEmail,
        called_off: bool,
        now: Timestamp,
    ) -> Result<()> {
        for watch in &self.emails {
            watch.after_outcome(store, batch, p, email, called_off, now)?;
        }
        Ok(())
    }

    /// Tells every feature of the waiting emails an erasure cancelled, in its batch.
    pub fn after_cancelled(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        emails: &[OutboundEmail],
        now: Timestamp,
    ) -> Result<()> {
        for watch in &self.emails {
            watch.after_cancelled(store, batch, p, emails, now)?;
        }
        Ok(())
    }

    /// Tells every feature of an email's first open or first click, in its batch.
    pub fn after_first_hit(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        engagement: &Engagement,
        hit: Hit,
    ) -> Result<()> {
        for watch in &self.emails {
            watch.after_first_hit(store, batch, p, engagement, hit)?;
        }
        Ok(())
    }

    /// Every state, empty, for a new project actor.
    pub fn new_states(&self) -> States {
        States(self.states.iter().map(|make| make()).collect())
    }

    /// Runs every after-events hook on `batch` (`events` not empty).
    pub fn run_after_events(
        &self,
        ctx: &EventsCtx,
        batch: &mut Batch,
        events: &[Event],
    ) -> Result<()> {
        for hook in &self.after_events {
            hook(ctx, batch, events)?;
        }
        Ok(())
    }
}
