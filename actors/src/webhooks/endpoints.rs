//! A project's endpoints, kept in its actor (`project::hooks::ProjectState`): the
//! fan-out reads them at every batch of events, and a read of the store per batch cost
//! `/v1/track` 5-10% of its throughput with an endpoint (measured, docs/performance.md).
//! Every write of an endpoint goes through the same actor and calls `forget`, so the
//! next batch reads them again; a restart or a move of the project starts empty.

use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::model::{Contact, ContactId, Event, ProjectId, Timestamp};
use crate::project::hooks::{ProjectState, States};
use crate::store::{Batch, Store};

use super::model::Webhook;
use super::records;

#[derive(Default)]
pub(crate) struct Endpoints(Mutex<Option<Arc<Vec<Webhook>>>>);

impl Endpoints {
    pub(crate) fn of(states: &States) -> Result<&Endpoints> {
        states.get::<Endpoints>()
    }

    /// The project's endpoints, oldest first: from memory, or read once.
    pub(crate) fn all(&self, store: &dyn Store, p: ProjectId) -> Result<Arc<Vec<Webhook>>> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(all) = held.as_ref() {
            return Ok(all.clone());
        }
        let all = Arc::new(records::all(store, p)?);
        *held = Some(all.clone());
        Ok(all)
    }

    /// An endpoint was written: the next read goes to the store.
    pub(crate) fn forget(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl ProjectState for Endpoints {
    fn name(&self) -> &'static str {
        "webhook endpoints"
    }

    fn load(&mut self, _store: &dyn Store, _p: ProjectId) -> Result<()> {
        self.forget();
        Ok(())
    }

    fn after_contact_write(
        &self,
        _store: &dyn Store,
        _p: ProjectId,
        _before: Option<&Contact>,
        _after: &Contact,
        _new_events: &[Event],
        _now: Timestamp,
    ) -> Result<Vec<Event>> {
        Ok(Vec::new())
    }

    fn on_contact_delete(
        &self,
        _store: &dyn Store,
        _batch: &mut Batch,
        _p: ProjectId,
        _c: ContactId,
    ) -> Result<()> {
        Ok(())
    }
}
