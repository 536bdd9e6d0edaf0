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
    stored(store, p, None, false).map(|v| Contact::decode(&v?))
}

/// Every stored contact of `p` (its stored bytes, for a light decode), in id order or,
/// `newest_first`, the other way, from past `after` (a `page_start`).
pub fn stored<'a>(
    store: &'a dyn Store,
    p: ProjectId,
    after: Option<&[u8]>,
    newest_first: bool,
) -> impl Iterator<Item = Result<Vec<u8>>> + 'a {
    store
        .scan(&keys::contacts(p), after, newest_first)
        .map(|kv| kv.map(|(_, v)| v))
}

pub fn get_contact(store: &dyn Store, p: ProjectId, id: ContactId) -> Result<Option<Contact>> {
    super::records::load(store, p, id)
}

/// Newest first. The cursor is the id of the last contact of the previous page, so a
/// page boundary survives inserts and deletes without skipping or repeating anyone.
/// The key a page of contacts starts after: its cursor is a contact id.
pub fn page_start(p: ProjectId, page: &PageRequest) -> Result<Option<Vec<u8>>> {
    page.cursor()
        .map(|c| {
            let id: ContactId = c
                .parse()
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?;
            Ok(keys::contact(p, id))
        })
        .transpose()
}

pub fn list_contacts(
    store: &dyn Store,
    p: ProjectId,
    filter: &ContactFilter,
    page: &PageRequest,
) -> Result<Page<Contact>> {
    let after = page_start(p, page)?;
    let needle = filter.search.as_ref().map(|s| s.trim().to_lowercase());
    let matches = |c: &Contact| {
        filter.subscribed.is_none_or(|s| c.subscribed == s)
            && needle
                .as_deref()
                .is_none_or(|n| c.email.as_str().contains(n))
    };
    let mut items = Vec::with_capacity(page.limit() + 1);
    for v in stored(store, p, after.as_deref(), true) {
        let c = Contact::decode(&v?)?;
        if matches(&c) {
            items.push(c);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    let Page {
        items, next_cursor, ..
    } = Page::of(items, page, 0, |c| c.id.to_string());
    let total =
        match (&needle, filter.subscribed) {
            (None, None) => read_counter(store, p, "contacts")?,
            (None, Some(true)) => read_counter(store, p, "subscribed")?,
            (None, Some(false)) => read_counter(store, p, "contacts")?
                .saturating_sub(read_counter(store, p, "subscribed")?),
            (Some(_), _) => {
                let mut n = 0;
                for v in stored(store, p, None, false) {
                    if matches(&Contact::decode(&v?)?) {
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

/// A page of `contacts_by_email_prefix`.
#[derive(Debug, Clone, Default)]
pub struct PrefixPage {
    /// In email order.
    pub items: Vec<Contact>,
    /// The email to pass as `after` for the next page.
    pub next_after: Option<String>,
    /// How many contacts match, counted up to the cap.
    pub matched: u64,
    /// Whether there are more matches than `matched` (the count stopped at the cap).
    pub more: bool,
}

/// Contacts whose email starts with `prefix` (lowercased), read through the email index
/// so that only matches are touched (a substring search, as `list_contacts` does, reads
/// every contact): the page after the email `after`, and the number of matches counted
/// up to `count_cap`. The dashboard's search, which must stay fast at any project size.
pub fn contacts_by_email_prefix(
    store: &dyn Store,
    p: ProjectId,
    prefix: &str,
    subscribed: Option<bool>,
    after: Option<&str>,
    limit: usize,
    count_cap: u64,
) -> Result<PrefixPage> {
    let prefix = prefix.trim().to_lowercase();
    let start = keys::contact_by_email(p, &prefix);
    let after = after.map(|a| keys::contact_by_email(p, &a.to_lowercase()));
    let mut out = PrefixPage::default();
    for kv in store.scan(&start, after.as_deref(), false) {
        let (_, v) = kv?;
        let id: ContactId = std::str::from_utf8(&v)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::storage("bad email index entry"))?;
        let Some(c) = super::records::load(store, p, id)? else {
            continue;
        };
        if subscribed.is_some_and(|s| c.subscribed != s) {
            continue;
        }
        if out.matched >= count_cap {
            out.more = true;
            break;
        }
        out.matched += 1;
        if out.items.len() < limit {
            out.items.push(c);
        } else if out.next_after.is_none() {
            out.next_after = out.items.last().map(|c| c.email.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod prefix_tests {
    use super::*;
    use crate::model::{EmailAddress, Timestamp};
    use crate::store::{Batch, SledStore};

    fn put(store: &dyn Store, p: ProjectId, email: &str, subscribed: bool) {
        let c = Contact {
            id: ContactId::new(),
            email: EmailAddress::parse(email).unwrap(),
            subscribed,
            data: Default::default(),
            created_at: Timestamp::from(0),
            updated_at: Timestamp::from(0),
        };
        let mut batch = Batch::new();
        batch.put(keys::contact(p, c.id), c.encode().unwrap());
        batch.put(
            keys::contact_by_email(p, email),
            c.id.to_string().into_bytes(),
        );
        store.apply(batch).unwrap();
    }

    fn emails(page: &PrefixPage) -> Vec<String> {
        page.items.iter().map(|c| c.email.to_string()).collect()
    }

    #[test]
    fn a_prefix_search_pages_in_email_order_and_counts_up_to_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let store: &dyn Store = &*store;
        let (p, other) = (ProjectId::new(), ProjectId::new());
        for e in [
            "bob@x.test",
            "ann@x.test",
            "anna@x.test",
            "andy@x.test",
            "carl@x.test",
        ] {
            put(store, p, e, e != "anna@x.test");
        }
        put(store, other, "anne@x.test", true);

        let first = contacts_by_email_prefix(store, p, "AN", None, None, 2, 100).unwrap();
        assert_eq!(emails(&first), ["andy@x.test", "ann@x.test"]);
        assert_eq!((first.matched, first.more), (3, false));
        let after = first.next_after.clone().unwrap();
        let second = contacts_by_email_prefix(store, p, "an", None, Some(&after), 2, 100).unwrap();
        assert_eq!(emails(&second), ["anna@x.test"]);
        assert_eq!(second.next_after, None);

        let subscribed =
            contacts_by_email_prefix(store, p, "an", Some(true), None, 10, 100).unwrap();
        assert_eq!(emails(&subscribed), ["andy@x.test", "ann@x.test"]);
        let capped = contacts_by_email_prefix(store, p, "", None, None, 1, 2).unwrap();
        assert_eq!((capped.matched, capped.more), (2, true));
        assert!(capped.next_after.is_some());
    }
}
