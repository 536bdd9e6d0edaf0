//! Reading segments: records, exact member counts (evaluated at read time) and members.

use super::records::{static_member_count, SEGMENTS_COUNTER};
use crate::error::{Error, FieldCode, Result};
use crate::model::{Contact, ContactId, Page, PageRequest, ProjectId, SegmentId};
use crate::project::counters::read_counter;
use crate::project::table::ContactTable;
use crate::segment::budget;
use crate::segment::scan::{self, Matcher};
use crate::segment::{Compiled, Group, Segment, SegmentKind};
use crate::store::{keys, paging, Store};

pub fn get_segment(store: &dyn Store, p: ProjectId, id: SegmentId) -> Result<Option<Segment>> {
    super::records::load(store, p, id)
}

/// Every segment of a project, oldest first, read as the walk goes (an export).
pub fn each_segment(store: &dyn Store, p: ProjectId) -> impl Iterator<Item = Result<Segment>> + '_ {
    store
        .scan(&keys::segments(p), None, false)
        .map(|kv| Segment::decode(&kv?.1))
}

/// The members of a STATIC segment, by id, oldest first.
pub fn static_members(
    store: &dyn Store,
    p: ProjectId,
    id: SegmentId,
) -> impl Iterator<Item = Result<ContactId>> + '_ {
    let prefix = keys::segment_members(p, id);
    store
        .scan(&prefix, None, false)
        .filter_map(move |kv| match kv {
            Ok((k, _)) => keys::id_after::<ContactId>(&k, &prefix).map(Ok),
            Err(e) => Some(Err(e)),
        })
}

/// Newest first; the cursor is the id of the last segment of the previous page.
pub fn list_segments(store: &dyn Store, p: ProjectId, page: &PageRequest) -> Result<Page<Segment>> {
    let total = read_counter(store, p, SEGMENTS_COUNTER)?;
    paging::newest_first(
        store,
        &keys::segments(p),
        page,
        total,
        Segment::decode,
        |s| s.id.to_string(),
    )
}

/// The exact member count of each segment at `now`. The DYNAMIC ones are counted
/// together, in one pass over the contacts, within `max_evaluations` (`budget`).
pub fn member_counts(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    segments: &[Segment],
    now: i64,
    max_evaluations: u64,
) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; segments.len()];
    let mut dynamic = Vec::new();
    let mut matchers = Vec::new();
    for (i, s) in segments.iter().enumerate() {
        match s.compiled() {
            Some(c) => {
                dynamic.push(i);
                matchers.push(Matcher::load(store, p, c)?);
            }
            None => counts[i] = static_member_count(store, p, s.id)?,
        }
    }
    if dynamic.is_empty() {
        return Ok(counts);
    }
    table.ensure_loaded(store, p)?;
    let conditions = matchers.iter().map(|m| m.compiled().conditions()).sum();
    budget::check("filters", table.len(), conditions, max_evaluations)?;
    for (i, n) in dynamic
        .into_iter()
        .zip(scan::count_table(table, &mut matchers, now)?)
    {
        counts[i] = n;
    }
    Ok(counts)
}

/// Refuses a filter that one request could not judge over the project's contacts
/// (`budget`), before a segment holding it is written: the answer counts its members.
pub fn check_filter_cost(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    filter: &Group,
    max_evaluations: u64,
) -> Result<()> {
    table.ensure_loaded(store, p)?;
    let conditions = Compiled::new(filter).conditions();
    budget::check("filters", table.len(), conditions, max_evaluations)
}

/// The segment's contacts, newest first, paged like `GET /contacts`; a DYNAMIC
/// segment's within `max_evaluations` (`budget`).
pub fn segment_contacts(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    segment: &Segment,
    page: &PageRequest,
    now: i64,
    max_evaluations: u64,
) -> Result<Page<Contact>> {
    if let (SegmentKind::Dynamic, Some(c)) = (segment.kind, segment.compiled()) {
        table.ensure_loaded(store, p)?;
        budget::check("filters", table.len(), c.conditions(), max_evaluations)?;
        let mut m = Matcher::load(store, p, c)?;
        return scan::page(store, table, p, &mut m, page, now);
    }
    let mut out = static_page(store, p, segment, page)?;
    out.total = static_member_count(store, p, segment.id)?;
    Ok(out)
}

/// A page of a STATIC segment's members, without the total.
fn static_page(
    store: &dyn Store,
    p: ProjectId,
    segment: &Segment,
    page: &PageRequest,
) -> Result<Page<Contact>> {
    let prefix = keys::segment_members(p, segment.id);
    let after = match page.cursor() {
        Some(c) => {
            let id: ContactId = c
                .parse()
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?;
            Some(keys::segment_member(p, segment.id, id))
        }
        None => None,
    };
    let mut items = Vec::with_capacity(page.limit() + 1);
    for kv in store.scan(&prefix, after.as_deref(), true) {
        let (k, _) = kv?;
        let Some(id) = keys::id_after::<ContactId>(&k, &prefix) else {
            continue;
        };
        if let Some(c) = crate::contact::records::load(store, p, id)? {
            items.push(c);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    Ok(Page::of(items, page, 0, |c| c.id.to_string()))
}

/// Pages through a segment's members for an export: the filter budget is checked and the
/// filter's event statistics are loaded once, as of the first page, and no page counts
/// the total (a DYNAMIC segment's is a pass over every contact).
pub struct MemberPages {
    segment: Segment,
    matcher: Option<Matcher>,
}

impl MemberPages {
    pub fn new(
        store: &dyn Store,
        table: &ContactTable,
        p: ProjectId,
        segment: Segment,
        max_evaluations: u64,
    ) -> Result<Self> {
        let matcher = match (segment.kind, segment.compiled()) {
            (SegmentKind::Dynamic, Some(c)) => {
                table.ensure_loaded(store, p)?;
                budget::check("filters", table.len(), c.conditions(), max_evaluations)?;
                Some(Matcher::load(store, p, c)?)
            }
            _ => None,
        };
        Ok(MemberPages { segment, matcher })
    }

    /// The page after `page`'s cursor; `total` is 0.
    pub fn page(
        &mut self,
        store: &dyn Store,
        p: ProjectId,
        page: &PageRequest,
        now: i64,
    ) -> Result<Page<Contact>> {
        match &mut self.matcher {
            Some(m) => scan::items(store, p, m, page, now),
            None => static_page(store, p, &self.segment, page),
        }
    }
}
