//! The suppression list's door, and the project's sending reputation.

pub use crate::feedback::stats::ProjectStats;
pub use crate::suppression::actions::{parse_reason, Imported};
pub use crate::suppression::{Reason, Suppression};

use super::{off_thread, Engine};
use crate::error::Result;
use crate::model::{EmailAddress, Page, PageRequest, ProjectId};
use crate::suppression::actions;

/// `engine.suppressions()`.
pub struct Suppressions<'e>(pub(super) &'e Engine);

impl Suppressions<'_> {
    /// A page of the list, newest first, of one reason or all.
    pub async fn list(
        &self,
        p: ProjectId,
        reason: Option<Reason>,
        page: PageRequest,
    ) -> Result<Page<Suppression>> {
        let registry = self.0.registry.clone();
        off_thread(move || actions::list(&registry, p, reason, &page)).await
    }

    /// Puts an address on the list; answers the entry and whether it is new.
    pub async fn add(
        &self,
        p: ProjectId,
        email: EmailAddress,
        reason: Reason,
    ) -> Result<(Suppression, bool)> {
        actions::add(&self.0.registry, p, email, reason).await
    }

    /// Takes an address off the list (404 when it is not on it).
    pub async fn remove(&self, p: ProjectId, email: String) -> Result<()> {
        actions::remove(&self.0.registry, p, email).await
    }

    /// Adds a CSV's addresses in one durable write.
    pub async fn import(&self, p: ProjectId, csv_text: String) -> Result<Imported> {
        actions::import(&self.0.registry, p, csv_text).await
    }

    /// The project's contacts, bounce and complaint rates and suppressed addresses.
    pub async fn stats(&self, p: ProjectId) -> Result<ProjectStats> {
        let registry = self.0.registry.clone();
        off_thread(move || crate::feedback::stats::project(&registry, p)).await
    }
}
