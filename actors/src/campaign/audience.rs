//! Who a campaign goes to: the subscribed contacts of the project, of a segment, or
//! matching the campaign's filter, read from the project's contact table.

use crate::campaign::{AudienceKind, Campaign};
use crate::error::{Error, Resource, Result};
use crate::model::{ContactId, ContactRef, ProjectId, SegmentId};
use crate::project::table::ContactTable;
use crate::segment::records as segments;
use crate::segment::scan::Matcher;
use crate::segment::{budget, Compiled, SegmentKind};
use crate::store::Store;

/// How the audience is found: every subscribed contact (that a matcher, if any,
/// accepts), or a static segment's members.
enum Source {
    Contacts(Option<Matcher>),
    Static(SegmentId),
}

fn source(store: &dyn Store, p: ProjectId, c: &Campaign) -> Result<Source> {
    // A campaign stored before this check (an ALL audience naming a segment) goes to no
    // one rather than to everyone.
    crate::campaign::records::check_audience(c)?;
    Ok(match (c.audience, &c.audience_filter, c.segment_id) {
        (AudienceKind::All, _, _) => Source::Contacts(None),
        (AudienceKind::Filtered, Some(g), _) => {
            Source::Contacts(Some(Matcher::load(store, p, Compiled::new(g))?))
        }
        (AudienceKind::Segment, _, Some(sid)) => {
            let s = segments::load(store, p, sid)?.ok_or(Error::NotFound(Resource::Segment))?;
            match (s.kind, s.compiled()) {
                (SegmentKind::Dynamic, Some(compiled)) => {
                    Source::Contacts(Some(Matcher::load(store, p, compiled)?))
                }
                _ => Source::Static(sid),
            }
        }
        _ => {
            return Err(Error::Internal(format!(
                "campaign {} has no audience",
                c.id
            )))
        }
    })
}

/// The recipients' contact ids, oldest contact first. Blocking work: a walk over every
/// contact of the project.
pub fn members(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    c: &Campaign,
    now: i64,
) -> Result<Vec<ContactId>> {
    table.ensure_loaded(store, p)?;
    let mut matcher = match source(store, p, c)? {
        Source::Contacts(m) => m,
        Source::Static(sid) => return static_members(store, table, p, sid, usize::MAX),
    };
    let mut ids = Vec::new();
    for row in table.rows() {
        let contact = ContactRef::decode(&row)?;
        if contact.subscribed && matcher.as_mut().is_none_or(|m| m.matches(&contact, now)) {
            ids.push(contact.id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Whether the audience has anyone, stopping at its first member; a filter is first
/// held to `max_evaluations` (see `budget`), as an empty audience costs a full walk.
pub fn any_member(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    c: &Campaign,
    now: i64,
    max_evaluations: u64,
) -> Result<bool> {
    table.ensure_loaded(store, p)?;
    let mut matcher = match source(store, p, c)? {
        Source::Contacts(m) => m,
        Source::Static(sid) => return Ok(!static_members(store, table, p, sid, 1)?.is_empty()),
    };
    if let Some(m) = &matcher {
        let field = match c.audience {
            AudienceKind::Segment => "segmentId",
            _ => "audienceFilter",
        };
        budget::check(
            field,
            table.len(),
            m.compiled().conditions(),
            max_evaluations,
        )?;
    }
    for row in table.rows() {
        let contact = ContactRef::decode(&row)?;
        if contact.subscribed && matcher.as_mut().is_none_or(|m| m.matches(&contact, now)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A static segment's subscribed members, at most `limit` of them.
fn static_members(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    s: SegmentId,
    limit: usize,
) -> Result<Vec<ContactId>> {
    let mut ids = Vec::new();
    for id in crate::segment::queries::static_members(store, p, s) {
        if ids.len() >= limit {
            break;
        }
        let id = id?;
        if table.get(id)?.is_some_and(|c| c.subscribed) {
            ids.push(id);
        }
    }
    Ok(ids)
}
