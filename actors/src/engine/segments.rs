//! The segments' door. Every count and page of members runs off the async threads and
//! within the project's filter budget (`segment::budget`).

pub use crate::model::Contact;
pub use crate::segment::queries::MemberPages;
pub use crate::segment::records::{CreateSegment, MembersOutcome, UpdateSegment};
pub use crate::segment::{slug, FilterDocument, Group, Segment, SegmentKind};

use super::{off_thread, Engine};
use crate::error::{Error, Resource, Result};
use crate::model::{EmailAddress, Page, PageRequest, ProjectId, SegmentId, Timestamp};
use crate::segment::{actions, queries};

/// `engine.segments()`.
pub struct Segments<'e>(pub(super) &'e Engine);

impl Segments<'_> {
    fn max_evaluations(&self) -> u64 {
        self.0.registry.tenant().max_filter_evaluations
    }

    fn now(&self) -> i64 {
        Timestamp::from(self.0.clock.now()).millis()
    }

    /// Refuses a filter that one request could not judge over the project's contacts.
    async fn within_budget(&self, p: ProjectId, filter: Option<&Group>) -> Result<()> {
        let Some(filter) = filter.cloned() else {
            return Ok(());
        };
        let (store, table) = (self.0.store.clone(), self.0.registry.contacts(p));
        let max = self.max_evaluations();
        off_thread(move || queries::check_filter_cost(&*store, &table, p, &filter, max)).await
    }

    /// A segment of `new`, its filter within the budget, with its member count.
    pub async fn create(&self, p: ProjectId, new: CreateSegment) -> Result<(Segment, u64)> {
        self.within_budget(p, new.filters.as_ref()).await?;
        let s = actions::create(&self.0.registry, p, new).await?;
        self.counted_one(p, s).await
    }

    /// The segment, or 404.
    pub fn get(&self, p: ProjectId, id: SegmentId) -> Result<Segment> {
        queries::get_segment(&*self.0.store, p, id)?.ok_or(Error::NotFound(Resource::Segment))
    }

    pub async fn list(&self, p: ProjectId, page: PageRequest) -> Result<Page<Segment>> {
        let store = self.0.store.clone();
        off_thread(move || queries::list_segments(&*store, p, &page)).await
    }

    pub async fn update(&self, p: ProjectId, patch: UpdateSegment) -> Result<(Segment, u64)> {
        self.within_budget(p, patch.filters.as_ref()).await?;
        let s = actions::update(&self.0.registry, p, patch).await?;
        self.counted_one(p, s).await
    }

    pub async fn delete(&self, p: ProjectId, id: SegmentId) -> Result<()> {
        actions::delete(&self.0.registry, p, id).await
    }

    /// Each segment with its exact member count now (the DYNAMIC ones in one pass).
    pub async fn counted(
        &self,
        p: ProjectId,
        segments: Vec<Segment>,
    ) -> Result<Vec<(Segment, u64)>> {
        let (store, table) = (self.0.store.clone(), self.0.registry.contacts(p));
        let (now, max) = (self.now(), self.max_evaluations());
        off_thread(move || {
            let counts = queries::member_counts(&*store, &table, p, &segments, now, max)?;
            Ok(segments.into_iter().zip(counts).collect())
        })
        .await
    }

    /// The segment with its member count now.
    pub async fn counted_one(&self, p: ProjectId, s: Segment) -> Result<(Segment, u64)> {
        self.counted(p, vec![s])
            .await?
            .pop()
            .ok_or_else(|| Error::Internal("a counted segment went missing".into()))
    }

    /// How many contacts a filter not yet saved matches, counted as a segment's are.
    pub async fn count_filter(&self, p: ProjectId, filter: Group) -> Result<u64> {
        self.within_budget(p, Some(&filter)).await?;
        let now = Timestamp::from(self.0.clock.now());
        let draft = Segment {
            id: SegmentId::new(),
            name: "draft".into(),
            description: None,
            kind: SegmentKind::Dynamic,
            filters: Some(filter),
            track_membership: false,
            created_at: now,
            updated_at: now,
        };
        Ok(self.counted_one(p, draft).await?.1)
    }

    /// A page of the segment's members, newest first.
    pub async fn contacts(
        &self,
        p: ProjectId,
        id: SegmentId,
        page: PageRequest,
    ) -> Result<Page<Contact>> {
        let (store, table) = (self.0.store.clone(), self.0.registry.contacts(p));
        let (now, max) = (self.now(), self.max_evaluations());
        off_thread(move || {
            let segment =
                queries::get_segment(&*store, p, id)?.ok_or(Error::NotFound(Resource::Segment))?;
            queries::segment_contacts(&*store, &table, p, &segment, &page, now, max)
        })
        .await
    }

    /// Adds (`add`) or removes contacts of a STATIC segment by email.
    pub async fn change_members(
        &self,
        p: ProjectId,
        id: SegmentId,
        emails: Vec<EmailAddress>,
        add: bool,
    ) -> Result<MembersOutcome> {
        actions::change_members(&self.0.registry, p, id, emails, add).await
    }

    /// The segment's members page by page, for an export (the budget is checked and
    /// the filter's statistics loaded once, here).
    pub async fn member_pages(&self, p: ProjectId, id: SegmentId) -> Result<MemberPages> {
        let (store, table) = (self.0.store.clone(), self.0.registry.contacts(p));
        let max = self.max_evaluations();
        off_thread(move || {
            let segment =
                queries::get_segment(&*store, p, id)?.ok_or(Error::NotFound(Resource::Segment))?;
            MemberPages::new(&*store, &table, p, segment, max)
        })
        .await
    }
}
