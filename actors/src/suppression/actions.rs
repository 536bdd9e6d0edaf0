//! What the API does with the suppression list: a paged read, and writes through the
//! project's actor, answered once durable.

use crate::error::{Error, FieldCode, Resource, Result};
use crate::model::{EmailAddress, Page, PageRequest, ProjectId};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::store::Batch;

use super::{records, Reason, Suppression};

/// `?reason=` as asked: one of the list's reasons, or an error naming them.
pub fn parse_reason(raw: &str) -> Result<Reason> {
    Reason::parse(raw).ok_or_else(|| {
        let hint = crate::near_miss::meant(raw, &Reason::NAMES)
            .map(|m| format!("; did you mean {m:?}?"))
            .unwrap_or_default();
        Error::field(
            "reason",
            FieldCode::InvalidEnumValue,
            format!(
                "{raw:?} is not a suppression reason (one of {}){hint}",
                Reason::NAMES.join(", ")
            ),
        )
    })
}

pub fn list(
    registry: &Registry,
    p: ProjectId,
    reason: Option<Reason>,
    page: &PageRequest,
) -> Result<Page<Suppression>> {
    let store = registry.store();
    let after = match page.cursor() {
        Some(c) => Some(
            uuid::Uuid::parse_str(c)
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?,
        ),
        None => None,
    };
    let (items, more) = records::page(&**store, p, reason, after, page.limit())?;
    let next_cursor = more
        .then(|| items.last().map(|s| s.id.to_string()))
        .flatten();
    Ok(Page {
        items,
        next_cursor,
        total: records::total(&**store, p, reason)?,
    })
}

/// Addresses on the list, in all.
pub fn total(registry: &Registry, p: ProjectId) -> Result<u64> {
    records::total(&**registry.store(), p, None)
}

/// Puts an address on the list by hand (`manual`, unless the caller names another
/// reason). Answers the entry and whether it is new; an address already on it keeps
/// its entry as it was.
pub async fn add(
    registry: &Registry,
    p: ProjectId,
    email: EmailAddress,
    reason: Reason,
) -> Result<(Suppression, bool)> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let now = ctx.now.millis();
                let before = records::load(ctx.store, p, &super::hash(email.as_str()))?;
                if let Some(s) = before.as_ref().filter(|s| s.applies(now)) {
                    return Ok((s.clone(), false));
                }
                let s = Suppression::new(email.as_str(), reason, now);
                let mut batch = Batch::new();
                records::put(&mut batch, ctx.store, p, before.as_ref(), &s)?;
                ctx.store.apply(batch)?;
                Ok((s, true))
            }),
        )
        .await
}

/// Takes an address off the list; 404 when it is not on it.
pub async fn remove(registry: &Registry, p: ProjectId, email: String) -> Result<()> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let mut batch = Batch::new();
                if !records::remove(&mut batch, ctx.store, p, &email)? {
                    return Err(Error::NotFound(Resource::Suppression));
                }
                ctx.store.apply(batch)
            }),
        )
        .await
}
