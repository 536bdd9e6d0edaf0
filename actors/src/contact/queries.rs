//! Read-side queries. They go straight to the store (no actor hop); callers on an
//! async thread should run the scanning ones in a blocking task.

use crate::error::{Error, FieldCode, Result};
use crate::model::{Contact, ContactId, Page, PageRequest, ProjectId};
use crate::store::{keys, Store};

use super::records::read_counter;

#[derive(Debug, Clone, Default)]
pub struct ContactFilter {
    pub subscribed: Option<bool>,
    /// A case-insensitive substring of the email.
    pub search: Option<String>,
}

/// Every contact of a project, oldest first, read as the walk goes (an export).
pub fn each_contact(store: &dyn Store, p: ProjectId) -> impl Iterator<Item = Result<Contact>> + '_ {
    store
        .scan(&keys::contacts(p), None, false)
        .map(|kv| Contact::decode(&kv?.1))
}

pub fn get_contact(store: &dyn Store, p: ProjectId, id: ContactId) -> Result<Option<Contact>> {
    super::records::load(store, p, id)
}

/// Newest first. The cursor is the id of the last contact of the previous page, so a
/// page boundary survives inserts and deletes without skipping or repeating anyone.
pub fn list_contacts(
    store: &dyn Store,
    p: ProjectId,
    filter: &ContactFilter,
    page: &PageRequest,
) -> Result<Page<Contact>> {
    let prefix = keys::contacts(p);
    let after = match page.cursor() {
        Some(c) => {
            let id: ContactId = c
                .parse()
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?;
            Some(keys::contact(p, id))
        }
        None => None,
    };
    let needle = filter.search.as_ref().map(|s| s.trim().to_lowercase());
    let matches = |c: &Contact| {
        filter.subscribed.is_none_or(|s| c.subscribed == s)
            && needle
                .as_deref()
                .is_none_or(|n| c.email.as_str().contains(n))
    };
    let mut items = Vec::with_capacity(page.limit() + 1);
    for kv in store.scan(&prefix, after.as_deref(), true) {
        let (_, v) = kv?;
        let c = Contact::decode(&v)?;
        if matches(&c) {
            items.push(c);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    let has_more = items.len() > page.limit();
    items.truncate(page.limit());
    let next_cursor = has_more
        .then(|| items.last().map(|c| c.id.to_string()))
        .flatten();
    let total =
        match (&needle, filter.subscribed) {
            (None, None) => read_counter(store, p, "contacts")?,
            (None, Some(true)) => read_counter(store, p, "subscribed")?,
            (None, Some(false)) => read_counter(store, p, "contacts")?
                .saturating_sub(read_counter(store, p, "subscribed")?),
            (Some(_), _) => {
                let mut n = 0;
                for kv in store.scan(&prefix, None, false) {
                    if matches(&Contact::decode(&kv?.1)?) {
                        n += 1;
                    }
                }
                n
            }
        };
    Ok(Page {
        items,
        next_cursor,
        total,
    })
}
