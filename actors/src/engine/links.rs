//! The links in marketing mail: what a token does, and the unsubscribe page's reads and
//! writes. (Opens and clicks are recorded through `engine.emails()`.)

pub use crate::campaign::unsubscribe::Recipient;
pub use crate::links::{Link, Resolved};

use super::Engine;
use crate::campaign::unsubscribe;
use crate::error::Result;
use crate::model::{CampaignId, ContactId, ProjectId, Timestamp};

/// `engine.links()`.
pub struct Links<'e>(pub(super) &'e Engine);

impl Links<'_> {
    /// What `token` does now; None for a token this server did not make.
    pub fn resolve(&self, token: &str) -> Result<Option<Resolved>> {
        let now = Timestamp::from(self.0.clock.now());
        self.0.registry.links().resolve(&*self.0.store, token, now)
    }

    /// The project a token's link belongs to, from the token alone (no store read), or
    /// None for a token this server did not make: requests are routed by it.
    pub fn project_of(&self, token: &str) -> Option<ProjectId> {
        self.0
            .registry
            .links()
            .read(token)
            .map(|(link, _)| link.project())
    }

    /// Who an unsubscribe link is for, as its page shows them.
    pub fn recipient(
        &self,
        p: ProjectId,
        contact: ContactId,
        campaign: Option<CampaignId>,
    ) -> Result<Recipient> {
        let table = self.0.registry.contacts(p);
        unsubscribe::recipient(&*self.0.store, &table, p, contact, campaign)
    }

    /// Unsubscribes the contact, from the campaign's link when there is one.
    pub async fn unsubscribe(
        &self,
        p: ProjectId,
        contact: ContactId,
        campaign: Option<CampaignId>,
    ) -> Result<()> {
        unsubscribe::unsubscribe_contact(&self.0.registry, p, contact, campaign).await
    }

    /// Undoes what the link's unsubscribe did; false when there was nothing to undo.
    pub async fn resubscribe(
        &self,
        p: ProjectId,
        contact: ContactId,
        campaign: Option<CampaignId>,
    ) -> Result<bool> {
        unsubscribe::resubscribe_contact(&self.0.registry, p, contact, campaign).await
    }
}
