//! Who a campaign goes to: the subscribed contacts of the project, of a segment, or
//! matching the campaign's filter, read from the project's contact table.

use crate::error::{Error, Resource, Result};
use crate::model::{AudienceKind, Campaign, ContactId, ContactRef, ProjectId};
use crate::project::segments;
use crate::project::table::ContactTable;
use crate::segment::scan::Matcher;
use crate::segment::{Compiled, SegmentKind};
use crate::store::{keys, Store};

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
    let mut matcher = match (c.audience, &c.audience_filter, c.segment_id) {
        (AudienceKind::All, _, _) => None,
        (AudienceKind::Filtered, Some(g), _) => Some(Matcher::load(store, p, Compiled::new(g))?),
        (AudienceKind::Segment, _, Some(sid)) => {
            let s = segments::load(store, p, sid)?.ok_or(Error::NotFound(Resource::Segment))?;
            match (s.kind, s.compiled()) {
                (SegmentKind::Dynamic, Some(compiled)) => Some(Matcher::load(store, p, compiled)?),
                _ => return static_members(store, table, p, sid),
            }
        }
        _ => {
            return Err(Error::Internal(format!(
                "campaign {} has no audience",
                c.id
            )))
        }
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

fn static_members(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    s: crate::model::SegmentId,
) -> Result<Vec<ContactId>> {
    let prefix = keys::segment_members(p, s);
    let mut ids = Vec::new();
    for kv in store.scan(&prefix, None, false) {
        let (k, _) = kv?;
        let Some(id) = keys::id_after::<ContactId>(&k, &prefix) else {
            continue;
        };
        if table.get(id)?.is_some_and(|c| c.subscribed) {
            ids.push(id);
        }
    }
    Ok(ids)
}
