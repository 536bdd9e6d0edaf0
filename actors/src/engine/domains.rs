//! The sender domains' door: add, read, check their DNS now, delete.

pub use crate::domain::{Domain, DomainName, DomainStatus, RecordPolicy};

use super::{off_thread, Engine};
use crate::domain::{actions, check_now, queries};
use crate::error::{Error, Resource, Result};
use crate::model::{DomainId, Page, PageRequest, ProjectId};

/// `engine.domains()`.
pub struct Domains<'e>(pub(super) &'e Engine);

impl Domains<'_> {
    /// A PENDING domain of `name`, with its DKIM key (within the project's count).
    pub async fn add(&self, p: ProjectId, name: DomainName) -> Result<Domain> {
        actions::add(&self.0.registry, p, name).await
    }

    /// The domain, or 404.
    pub fn get(&self, p: ProjectId, id: DomainId) -> Result<Domain> {
        queries::get_domain(&*self.0.store, p, id)?.ok_or(Error::NotFound(Resource::Domain))
    }

    /// A page of the project's domains, of one status or all.
    pub async fn list(
        &self,
        p: ProjectId,
        status: Option<DomainStatus>,
        page: PageRequest,
    ) -> Result<Page<Domain>> {
        let store = self.0.store.clone();
        off_thread(move || queries::list_domains(&*store, p, status, &page)).await
    }

    pub async fn delete(&self, p: ProjectId, id: DomainId) -> Result<()> {
        actions::delete(&self.0.registry, p, id).await
    }

    /// Looks the domain's records up now and writes what was found.
    pub async fn check_now(&self, p: ProjectId, id: DomainId) -> Result<Domain> {
        let e = self.0;
        check_now(&e.registry, &e.resolver, &e.domain_records, p, id).await
    }

    /// What a domain must publish (the records each answer shows).
    pub fn policy(&self) -> &RecordPolicy {
        &self.0.domain_records
    }
}
