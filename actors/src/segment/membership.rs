//! Segment membership tracking. The project actor keeps its segments (`TrackedSegments`, a
//! state the core holds for this feature: `project::hooks::ProjectState`), with each
//! DYNAMIC filter compiled once. When a contact changes, the core's write unit asks it
//! (`after_contact_write`) which tracked segments the contact entered or left, and
//! records `segment.<slug>.entry` / `.exit` in the same batch as the change; a deleted
//! contact leaves its STATIC segments in its delete batch (`on_contact_delete`).
//!
//! Membership is judged on the change itself: the contact before (with its event
//! statistics before) against the contact after (with the events of this write), both
//! at the write's instant. A contact that did not change membership gets no event.

use std::collections::HashMap;

use serde_json::json;

use super::scan::{self, Matcher};
use super::{Compiled, ContactSubject, Segment, SegmentKind};
use crate::error::Result;
use crate::model::{
    Contact, ContactId, EmailAddress, Event, EventStats, ProjectId, SegmentId, Timestamp,
};
use crate::project::counters::add_to_counter;
use crate::project::events;
use crate::project::hooks::{ProjectState, States};
use crate::store::{keys, Batch, Store};

pub struct Entry {
    pub segment: Segment,
    pub compiled: Option<Compiled>,
}

/// Every segment of a project, as the write path needs them.
#[derive(Default)]
pub struct TrackedSegments {
    entries: Vec<Entry>,
}

impl TrackedSegments {
    /// The project's segments, from the actor's states.
    pub fn of(states: &States) -> Result<&TrackedSegments> {
        states.get::<TrackedSegments>()
    }

    pub fn of_mut(states: &mut States) -> Result<&mut TrackedSegments> {
        states.get_mut::<TrackedSegments>()
    }

    pub fn load(store: &dyn Store, p: ProjectId) -> Result<Self> {
        let mut entries = Vec::new();
        for kv in store.scan(&keys::segments(p), None, false) {
            let segment = Segment::decode(&kv?.1)?;
            entries.push(Entry {
                compiled: segment.compiled(),
                segment,
            });
        }
        Ok(TrackedSegments { entries })
    }

    pub fn get(&self, id: SegmentId) -> Option<&Entry> {
        self.entries.iter().find(|e| e.segment.id == id)
    }

    pub fn put(&mut self, segment: Segment) {
        let entry = Entry {
            compiled: segment.compiled(),
            segment,
        };
        match self
            .entries
            .iter_mut()
            .find(|e| e.segment.id == entry.segment.id)
        {
            Some(slot) => *slot = entry,
            None => self.entries.push(entry),
        }
    }

    pub fn remove(&mut self, id: SegmentId) {
        self.entries.retain(|e| e.segment.id != id);
    }

    /// Segments that record entries and exits (each is judged on every contact write).
    pub fn tracked_count(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.segment.track_membership)
            .count()
    }

    pub fn statics(&self) -> impl Iterator<Item = &Segment> {
        self.entries
            .iter()
            .map(|e| &e.segment)
            .filter(|s| s.kind == SegmentKind::Static)
    }

    fn tracked_dynamic(&self) -> impl Iterator<Item = (&Segment, &Compiled)> {
        self.entries
            .iter()
            .filter(|e| e.segment.track_membership)
            .filter_map(|e| e.compiled.as_ref().map(|c| (&e.segment, c)))
    }
}

/// The entry or exit event of one contact for one segment.
pub fn membership_event(
    segment: &Segment,
    entry: bool,
    contact: ContactId,
    email: &EmailAddress,
    now: Timestamp,
) -> Event {
    let mut e = Event::system(&segment.event_name(entry), contact, email, now);
    e.data
        .insert("segmentId".into(), json!(segment.id.to_string()));
    e.data.insert("segmentName".into(), json!(segment.name));
    e
}

impl ProjectState for TrackedSegments {
    fn name(&self) -> &'static str {
        "segments"
    }

    fn load(&mut self, store: &dyn Store, p: ProjectId) -> Result<()> {
        *self = TrackedSegments::load(store, p)?;
        Ok(())
    }

    fn after_contact_write(
        &self,
        store: &dyn Store,
        p: ProjectId,
        before: Option<&Contact>,
        after: &Contact,
        new_events: &[Event],
        now: Timestamp,
    ) -> Result<Vec<Event>> {
        on_contact_write(store, p, self, before, after, new_events, now)
    }

    fn on_contact_delete(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        c: ContactId,
    ) -> Result<()> {
        for segment in self.statics() {
            drop_member(store, batch, p, segment.id, c)?;
        }
        Ok(())
    }
}

/// The entries and exits caused by one contact write. `new_events` are the events the
/// write records for this contact (they count as already triggered "after").
pub fn on_contact_write(
    store: &dyn Store,
    p: ProjectId,
    audience: &TrackedSegments,
    before: Option<&Contact>,
    after: &Contact,
    new_events: &[Event],
    now: Timestamp,
) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    let mut known: HashMap<String, Option<EventStats>> = HashMap::new();
    for (segment, compiled) in audience.tracked_dynamic() {
        let names = compiled.event_names();
        let mut stats_before = Vec::with_capacity(names.len());
        for name in names {
            if !known.contains_key(name) {
                let st = match before {
                    Some(_) => {
                        events::contact_stats(store, p, after.id, std::slice::from_ref(name))?[0]
                    }
                    None => None,
                };
                known.insert(name.clone(), st);
            }
            stats_before.push(known[name]);
        }
        let stats_after: Vec<Option<EventStats>> = names
            .iter()
            .zip(&stats_before)
            .map(|(name, st)| {
                let mut st = *st;
                for e in new_events
                    .iter()
                    .filter(|e| &e.name == name && e.contact_id == after.id)
                {
                    st.get_or_insert_with(EventStats::default)
                        .add(e.created_at.millis());
                }
                st
            })
            .collect();
        let was = before.is_some_and(|b| {
            compiled.matches(
                &ContactSubject::new(compiled, b, &stats_before),
                now.millis(),
            )
        });
        let is = compiled.matches(
            &ContactSubject::new(compiled, after, &stats_after),
            now.millis(),
        );
        if was != is {
            out.push(membership_event(segment, is, after.id, &after.email, now));
        }
    }
    Ok(out)
}

/// The entries and exits caused by replacing a tracked segment's filter: every contact
/// is judged by the old and the new filter, at `now`.
pub fn on_filter_change(
    store: &dyn Store,
    p: ProjectId,
    segment: &Segment,
    old: Compiled,
    new: Compiled,
    now: Timestamp,
) -> Result<Vec<Event>> {
    let mut before = Matcher::load(store, p, old)?;
    let mut after = Matcher::load(store, p, new)?;
    let mut out = Vec::new();
    scan::each_pair(
        store,
        p,
        &mut before,
        &mut after,
        now.millis(),
        |id, email, was, is| {
            if was != is {
                let email = EmailAddress::parse(email).map_err(|_| {
                    crate::error::Error::storage(format!("stored contact {id} has a bad email"))
                })?;
                out.push(membership_event(segment, is, id, &email, now));
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// The count of a STATIC segment's members.
pub fn members_counter(s: SegmentId) -> String {
    format!("sm/{s}")
}

/// Removes a deleted contact from a STATIC segment, in the contact's delete batch.
pub fn drop_member(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    s: SegmentId,
    c: ContactId,
) -> Result<()> {
    let key = keys::segment_member(p, s, c);
    if store.get(&key)?.is_some() {
        batch.delete(key);
        add_to_counter(store, batch, p, &members_counter(s), -1)?;
    }
    Ok(())
}
