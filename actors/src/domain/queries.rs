//! Domain reads, straight from the store.

use super::model::{Domain, DomainStatus};
use crate::error::{Error, FieldCode, Result};
use crate::model::{DomainId, Page, PageRequest, ProjectId};
use crate::store::{keys, Store};

pub fn get_domain(store: &dyn Store, p: ProjectId, id: DomainId) -> Result<Option<Domain>> {
    store
        .get(&keys::domain(p, id))?
        .map(|b| read(store, p, &b))
        .transpose()
}

/// A stored domain, with what its last check found of its DMARC record (byte 0 of
/// `keys::domain_advice`) and its return-path host (byte 1, and the return path's domain
/// it pointed at after it; absent before it existed).
fn read(store: &dyn Store, p: ProjectId, bytes: &[u8]) -> Result<Domain> {
    let mut d = Domain::decode(bytes)?;
    if let Some(advice) = store.get(&keys::domain_advice(p, d.id))? {
        d.dmarc_verified = advice.first() == Some(&1);
        if advice.get(1) == Some(&1) {
            d.return_path_for = advice
                .get(2..)
                .and_then(|t| std::str::from_utf8(t).ok())
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
        }
    }
    Ok(d)
}

pub fn find_by_name(store: &dyn Store, p: ProjectId, name: &str) -> Result<Option<Domain>> {
    let Some(id) = store.get(&keys::domain_by_name(p, name))? else {
        return Ok(None);
    };
    let id: DomainId = std::str::from_utf8(&id)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::storage("bad domain index entry"))?;
    get_domain(store, p, id)
}

/// Newest first; the cursor is the id of the last domain of the previous page. A
/// project has few domains, so `total` is a count over them.
pub fn list_domains(
    store: &dyn Store,
    p: ProjectId,
    status: Option<DomainStatus>,
    page: &PageRequest,
) -> Result<Page<Domain>> {
    let prefix = keys::domains(p);
    let after = match page.cursor() {
        Some(c) => {
            let id: DomainId = c
                .parse()
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?;
            Some(keys::domain(p, id))
        }
        None => None,
    };
    let matches = |d: &Domain| status.is_none_or(|s| d.status == s);
    let mut items = Vec::with_capacity(page.limit() + 1);
    for kv in store.scan(&prefix, after.as_deref(), true) {
        let d = read(store, p, &kv?.1)?;
        if matches(&d) {
            items.push(d);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    let Page {
        items, next_cursor, ..
    } = Page::of(items, page, 0, |d| d.id.to_string());
    let mut total = 0;
    for kv in store.scan(&prefix, None, false) {
        if matches(&Domain::decode(&kv?.1)?) {
            total += 1;
        }
    }
    Ok(Page {
        items,
        next_cursor,
        total,
    })
}

/// Every domain of every project, for the background re-check.
pub fn all_domains(store: &dyn Store) -> Result<Vec<(ProjectId, DomainId)>> {
    let mut out = Vec::new();
    for kv in store.scan(keys::ALL_DOMAINS, None, false) {
        let (k, _) = kv?;
        match keys::parse_domain_index(&k) {
            Some(pair) => out.push(pair),
            None => tracing::warn!(key = %String::from_utf8_lossy(&k), "bad domain index key"),
        }
    }
    Ok(out)
}
