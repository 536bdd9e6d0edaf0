//! Segment writes: create, update, delete, and the members of STATIC segments. Each
//! is one batch. A filter edit on a tracked segment records the entries and exits it
//! causes in the same batch.

use super::membership::{self, members_counter, TrackedSegments};
use super::{Group, Segment, SegmentKind};
use crate::error::{Error, FieldCode, Resource, Result};
use crate::model::{EmailAddress, Event, ProjectId, SegmentId};
use crate::project::counters::{add_to_counter, read_counter};
use crate::project::events;
use crate::project::write::WriteCtx;
use crate::store::{keys, Batch, Store};

pub const SEGMENTS_COUNTER: &str = "segments";

/// The number of members of a STATIC segment (kept in the batches that change it).
pub fn static_member_count(store: &dyn Store, p: ProjectId, s: SegmentId) -> Result<u64> {
    read_counter(store, p, &members_counter(s))
}

pub fn load(store: &dyn Store, p: ProjectId, id: SegmentId) -> Result<Option<Segment>> {
    store
        .get(&keys::segment(p, id))?
        .map(|b| Segment::decode(&b))
        .transpose()
}

/// Writes a new segment; the caller puts it in the actor's `TrackedSegments` once applied.
pub fn create(ctx: &WriteCtx, msg: CreateSegment) -> Result<Segment> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let segment = Segment {
        id: SegmentId::new(),
        name: msg.name,
        description: msg.description,
        kind: msg.kind,
        filters: msg.filters,
        track_membership: msg.track_membership,
        created_at: now,
        updated_at: now,
    };
    let mut batch = Batch::new();
    batch.put(keys::segment(p, segment.id), segment.encode()?);
    add_to_counter(store, &mut batch, p, SEGMENTS_COUNTER, 1)?;
    store.apply(batch)?;
    Ok(segment)
}

/// Writes a segment's change; the caller puts it in the actor's `TrackedSegments` once applied.
pub fn update(ctx: &WriteCtx, msg: UpdateSegment) -> Result<Segment> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let before = load(store, p, msg.id)?.ok_or(Error::NotFound(Resource::Segment))?;
    let mut after = before.clone();
    if let Some(name) = msg.name {
        after.name = name;
    }
    if let Some(description) = msg.description {
        after.description = description;
    }
    if let Some(track) = msg.track_membership {
        after.track_membership = track;
    }
    if let Some(filters) = msg.filters {
        if after.kind == SegmentKind::Static {
            return Err(Error::field(
                "filters",
                FieldCode::Custom,
                "A STATIC segment takes no filters; manage its members instead",
            ));
        }
        after.filters = Some(filters);
    }
    after.updated_at = now;
    let mut batch = Batch::new();
    batch.put(keys::segment(p, after.id), after.encode()?);
    // Entries and exits are recorded when an already tracked segment's filter changes.
    if before.track_membership && after.track_membership && before.filters != after.filters {
        if let (Some(old), Some(new)) = (before.compiled(), after.compiled()) {
            let moves = membership::on_filter_change(store, p, &after, old, new, now)?;
            events::append_all(ctx, &mut batch, &moves)?;
        }
    }
    store.apply(batch)?;
    Ok(after)
}

/// Deletes a segment; the caller takes it out of the actor's `TrackedSegments` once applied.
pub fn delete(ctx: &WriteCtx, id: SegmentId) -> Result<()> {
    let (store, p) = (ctx.store, ctx.project);
    let segment = load(store, p, id)?.ok_or(Error::NotFound(Resource::Segment))?;
    let mut batch = Batch::new();
    batch.delete(keys::segment(p, id));
    if segment.kind == SegmentKind::Static {
        for kv in store.scan(&keys::segment_members(p, id), None, false) {
            batch.delete(kv?.0);
        }
        batch.delete(keys::counter(p, &members_counter(id)));
    }
    add_to_counter(store, &mut batch, p, SEGMENTS_COUNTER, -1)?;
    store.apply(batch)?;
    Ok(())
}

/// The STATIC segment `id`; a DYNAMIC one gives 409 (its members follow its filter).
fn static_segment(audience: &TrackedSegments, id: SegmentId) -> Result<&Segment> {
    let entry = audience.get(id).ok_or(Error::NotFound(Resource::Segment))?;
    if entry.segment.kind != SegmentKind::Static {
        return Err(Error::Conflict {
            message: "Members can only be added to or removed from a STATIC segment".into(),
            suggestion: Some("Change the filters of a DYNAMIC segment instead".into()),
        });
    }
    Ok(&entry.segment)
}

/// Adds (`add == true`) or removes the contacts with these emails.
pub fn change_members(
    ctx: &WriteCtx,
    id: SegmentId,
    emails: &[EmailAddress],
    add: bool,
) -> Result<MembersOutcome> {
    let (store, p) = (ctx.store, ctx.project);
    let segment = static_segment(TrackedSegments::of(ctx.states)?, id)?;
    let mut batch = Batch::new();
    let mut events: Vec<Event> = Vec::new();
    let mut not_found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut changed: i64 = 0;
    for email in emails {
        if !seen.insert(email.as_str()) {
            continue;
        }
        let Some(contact) = ctx.table.id_by_email(email.as_str()) else {
            not_found.push(email.to_string());
            continue;
        };
        let key = keys::segment_member(p, id, contact);
        let is_member = store.get(&key)?.is_some();
        if add == is_member {
            continue;
        }
        if add {
            batch.put(key, Vec::new());
        } else {
            batch.delete(key);
        }
        changed += 1;
        if segment.track_membership {
            events.push(membership::membership_event(
                segment, add, contact, email, ctx.now,
            ));
        }
    }
    if changed > 0 {
        let delta = if add { changed } else { -changed };
        add_to_counter(store, &mut batch, p, &members_counter(id), delta)?;
        events::append_all(ctx, &mut batch, &events)?;
        store.apply(batch)?;
    }
    Ok(MembersOutcome {
        changed: changed as u64,
        not_found,
    })
}

#[derive(Debug)]
pub struct CreateSegment {
    pub name: String,
    pub description: Option<String>,
    pub kind: SegmentKind,
    /// Some exactly when `kind` is DYNAMIC.
    pub filters: Option<Group>,
    pub track_membership: bool,
}

/// Each field, when Some, replaces the current value.
#[derive(Debug)]
pub struct UpdateSegment {
    pub id: SegmentId,
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub filters: Option<Group>,
    pub track_membership: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MembersOutcome {
    /// Contacts added (or removed) by this call; ones already in that state are not counted.
    pub changed: u64,
    /// Emails with no contact in the project.
    pub not_found: Vec<String>,
}
