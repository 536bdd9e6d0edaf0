//! The events' door: `/v1/track`, and the project's events.

pub use crate::event::queries::EventFilter;
pub use crate::event::track::{Track, TrackOutcome};
pub use crate::model::{Event, EventStats};

use super::{off_thread, Engine};
use crate::error::{Error, Resource, Result};
use crate::event::{actions, queries};
use crate::model::{EventId, Page, PageRequest, ProjectId, Timestamp};

/// `engine.events()`.
pub struct Events<'e>(pub(super) &'e Engine);

impl Events<'_> {
    /// Records the event and creates or updates its contact, in one durable write.
    pub async fn track(&self, p: ProjectId, req: Track) -> Result<TrackOutcome> {
        actions::track(&self.0.registry, p, req).await
    }

    /// The event, or 404.
    pub fn get(&self, p: ProjectId, id: EventId) -> Result<Event> {
        queries::get_event(&*self.0.store, p, id)?.ok_or(Error::NotFound(Resource::Event))
    }

    /// A page of the events `filter` keeps, newest first.
    pub async fn list(
        &self,
        p: ProjectId,
        filter: EventFilter,
        page: PageRequest,
    ) -> Result<Page<Event>> {
        let store = self.0.store.clone();
        off_thread(move || queries::list_events(&*store, p, &filter, &page)).await
    }

    /// How many events of each of `names` the project has on each of `days` (each a
    /// start in milliseconds, the day `day_ms` long): one row of counts a name, in one
    /// task off the runtime (the overview's chart asks for 56 at once).
    pub async fn daily_counts(
        &self,
        p: ProjectId,
        names: Vec<String>,
        days: Vec<i64>,
        day_ms: i64,
    ) -> Result<Vec<Vec<u64>>> {
        let store = self.0.store.clone();
        off_thread(move || {
            let count = |name: &str, start: i64| {
                let filter = EventFilter {
                    name: Some(name.to_owned()),
                    since: Some(Timestamp::from(start)),
                    until: Some(Timestamp::from(start + day_ms - 1)),
                    ..Default::default()
                };
                queries::list_events(&*store, p, &filter, &PageRequest::first(1)).map(|pg| pg.total)
            };
            names
                .iter()
                .map(|n| days.iter().map(|d| count(n, *d)).collect())
                .collect()
        })
        .await
    }

    /// Every event name of the project, with its count and when it was last seen.
    pub async fn names(&self, p: ProjectId) -> Result<Vec<(String, EventStats)>> {
        let store = self.0.store.clone();
        off_thread(move || queries::event_names(&*store, p)).await
    }
}
