//! The campaigns' door: every read and write of a project's campaigns the edge makes.
//! The rules are in `crate::campaign`; this names them once for the server.

pub use crate::campaign::records::CampaignPatch;
pub use crate::campaign::{AudienceKind, Campaign, CampaignStats, CampaignStatus, NewCampaign};

use super::{off_thread, Engine};
use crate::campaign::{actions, records, stats};
use crate::error::Result;
use crate::model::{CampaignId, EmailAddress, EmailId, Page, PageRequest, ProjectId, Timestamp};

/// `engine.campaigns()`.
pub struct Campaigns<'e>(pub(super) &'e Engine);

impl Campaigns<'_> {
    /// A DRAFT campaign made of `new`, with its id and times (its templates compile, its
    /// sender's domain is verified and its audience is whole).
    pub async fn create(&self, p: ProjectId, new: NewCampaign) -> Result<Campaign> {
        actions::create(&self.0.registry, p, new).await
    }

    /// The campaign, or 404.
    pub fn get(&self, p: ProjectId, id: CampaignId) -> Result<Campaign> {
        records::get(&*self.0.store, p, id)
    }

    /// A page of the project's campaigns, newest first.
    pub async fn list(&self, p: ProjectId, page: PageRequest) -> Result<Page<Campaign>> {
        let store = self.0.store.clone();
        off_thread(move || records::list(&*store, p, &page)).await
    }

    pub async fn update(
        &self,
        p: ProjectId,
        id: CampaignId,
        patch: CampaignPatch,
    ) -> Result<Campaign> {
        actions::update(&self.0.registry, p, id, patch).await
    }

    pub async fn delete(&self, p: ProjectId, id: CampaignId) -> Result<()> {
        actions::delete(&self.0.registry, p, id).await
    }

    /// Sends at `at`, or now when `at` is None or past.
    pub async fn send(
        &self,
        p: ProjectId,
        id: CampaignId,
        at: Option<Timestamp>,
    ) -> Result<Campaign> {
        actions::send(&self.0.registry, &self.0.runners, p, id, at).await
    }

    pub async fn cancel(&self, p: ProjectId, id: CampaignId) -> Result<Campaign> {
        actions::cancel(&self.0.registry, p, id).await
    }

    /// A PAUSED campaign goes on sending.
    pub async fn resume(&self, p: ProjectId, id: CampaignId) -> Result<Campaign> {
        actions::resume(&self.0.registry, &self.0.runners, p, id).await
    }

    /// One email of the campaign to `to`, not counted in its stats.
    pub async fn test(&self, p: ProjectId, id: CampaignId, to: EmailAddress) -> Result<EmailId> {
        actions::test(&self.0.registry, &self.0.templates, p, id, to).await
    }

    /// The campaign's counts (404 for no such campaign).
    pub fn stats(&self, p: ProjectId, id: CampaignId) -> Result<CampaignStats> {
        records::get(&*self.0.store, p, id)?;
        stats::load(&*self.0.store, p, id)
    }

    /// Why a PAUSED campaign stopped; None for any other.
    pub fn paused_reason(&self, p: ProjectId, id: CampaignId) -> Result<Option<String>> {
        actions::paused_reason(&self.0.registry, p, id)
    }

    /// How many campaigns this node is sending now.
    pub fn sending_count(&self) -> Result<u64> {
        self.0.runners.sending_count()
    }
}
