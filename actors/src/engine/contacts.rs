//! The contacts' door: upserts and patches, reads and searches, the erasure of a
//! contact, CSV imports, and the pages of an export.

pub use crate::contact::import::{guarded as csv_guarded, Import, ImportStatus};
pub use crate::contact::queries::{ContactFilter, PrefixPage};
pub use crate::contact::records::{PatchContact, UpsertContact, UpsertOutcome};
pub use crate::erasure::runner::Erased;
pub use crate::model::Contact;
pub use crate::segment::queries::MemberPages;

use std::sync::{Arc, Mutex};

use super::{off_thread, Engine};
use crate::contact::{actions, import, import_runner, queries};
use crate::error::{Error, Resource, Result};
use crate::model::{ContactId, ImportId, Page, PageRequest, ProjectId, Timestamp};

/// `engine.contacts()`.
pub struct Contacts<'e>(pub(super) &'e Engine);

impl Contacts<'_> {
    /// Creates or updates the contact of `req.email`, answered once durable.
    pub async fn upsert(&self, p: ProjectId, req: UpsertContact) -> Result<UpsertOutcome> {
        actions::upsert(&self.0.registry, p, req).await
    }

    /// Changes the subscription or the data of the contact `req.id` (404 when gone).
    pub async fn patch(&self, p: ProjectId, req: PatchContact) -> Result<Contact> {
        actions::patch(&self.0.registry, p, req).await
    }

    /// The contact, or 404.
    pub fn get(&self, p: ProjectId, id: ContactId) -> Result<Contact> {
        queries::get_contact(&*self.0.store, p, id)?.ok_or(Error::NotFound(Resource::Contact))
    }

    /// A page of the contacts `filter` keeps, newest first.
    pub async fn list(
        &self,
        p: ProjectId,
        filter: ContactFilter,
        page: PageRequest,
    ) -> Result<Page<Contact>> {
        let store = self.0.store.clone();
        off_thread(move || queries::list_contacts(&*store, p, &filter, &page)).await
    }

    /// Contacts whose email starts with `prefix`, through the email index (the
    /// dashboard's search): the page after the email `after`, matches counted up to
    /// `count_cap`.
    pub async fn by_email_prefix(
        &self,
        p: ProjectId,
        prefix: String,
        subscribed: Option<bool>,
        after: Option<String>,
        limit: usize,
        count_cap: u64,
    ) -> Result<PrefixPage> {
        let store = self.0.store.clone();
        off_thread(move || {
            queries::contacts_by_email_prefix(
                &*store,
                p,
                &prefix,
                subscribed,
                after.as_deref(),
                limit,
                count_cap,
            )
        })
        .await
    }

    /// Deletes the contact: it is gone (and its erasure durable) when this answers; the
    /// rest of its data is erased by then, or queued.
    pub async fn delete(&self, p: ProjectId, id: ContactId) -> Result<Erased> {
        crate::erasure::runner::delete_contact(&self.0.registry, p, id).await
    }

    /// Starts importing `csv` in the background, unless `max_running` imports of the
    /// project are under way.
    pub async fn import(&self, p: ProjectId, csv: Vec<u8>, max_running: u64) -> Result<Import> {
        import_runner::start(&self.0.registry, p, csv, max_running).await
    }

    /// The import, or 404.
    pub fn get_import(&self, p: ProjectId, id: ImportId) -> Result<Import> {
        import::load(&*self.0.store, p, id)?.ok_or(Error::NotFound(Resource::Import))
    }

    /// The next page of a segment's members for an export (`segments().member_pages`).
    pub async fn member_page(
        &self,
        pages: Arc<Mutex<MemberPages>>,
        p: ProjectId,
        page: PageRequest,
    ) -> Result<Page<Contact>> {
        let store = self.0.store.clone();
        let now = Timestamp::from(self.0.clock.now()).millis();
        off_thread(move || {
            let mut pages = pages.lock().unwrap_or_else(|e| e.into_inner());
            pages.page(&*store, p, &page, now)
        })
        .await
    }
}
