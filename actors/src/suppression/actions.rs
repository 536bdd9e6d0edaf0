//! What the API does with the suppression list: a paged read, and writes through the
//! project's actor, answered once durable.

use crate::error::{Error, FieldCode, FieldError, Resource, Result};
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
    // As the list keys it: an address written as a send would take it.
    let email = EmailAddress::parse(email.trim())
        .map(|e| e.as_str().to_owned())
        .unwrap_or(email);
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let mut batch = Batch::new();
                if !records::remove(&mut batch, ctx.store, p, &email)? {
                    return Err(Error::NotFound(Resource::Suppression));
                }
                ctx.store.apply(batch).map(drop)
            }),
        )
        .await
}

/// What an import made of its rows.
#[derive(Debug, Default, Clone)]
pub struct Imported {
    pub added: u64,
    /// On the list already (kept as they were).
    pub existing: u64,
    /// Rows that name no valid address: (row number, counting the header as 1; why).
    pub invalid: Vec<(u64, String)>,
}

/// Rows one import takes; more is refused whole (split the file).
pub const MAX_IMPORT_ROWS: usize = 50_000;

/// Puts the addresses of a CSV on the list (a list a tenant brings from another
/// provider): the `email` column (any case; the header row must name it); a `reason` column with one of the list's reasons is kept (else `manual`). A header row
/// is required. One durable write for the whole file.
pub async fn import(registry: &Registry, p: ProjectId, csv_text: String) -> Result<Imported> {
    if csv_text.trim().is_empty() {
        return Err(Error::field(
            "file",
            FieldCode::TooSmall,
            "The CSV is empty: send a header row (email) and a row per address",
        ));
    }
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(csv_text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| {
            Error::field(
                "file",
                FieldCode::Custom,
                format!("The CSV does not parse: {e}"),
            )
        })?
        .clone();
    let column = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let Some(email_col) = column("email") else {
        return Err(Error::Validation(vec![FieldError::new(
            "file",
            FieldCode::Custom,
            "The CSV's header row names no email column",
        )
        .suggesting("Start the file with a header row such as: email,reason")]));
    };
    let reason_col = column("reason");
    let mut rows = Vec::new();
    let mut out = Imported::default();
    for (i, record) in reader.records().enumerate() {
        let row = i as u64 + 2;
        if rows.len() + out.invalid.len() >= MAX_IMPORT_ROWS {
            return Err(Error::field(
                "file",
                FieldCode::TooBig,
                format!("More than {MAX_IMPORT_ROWS} rows: split the file"),
            ));
        }
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                out.invalid
                    .push((row, format!("the row does not parse: {e}")));
                continue;
            }
        };
        let raw = record.get(email_col).unwrap_or_default();
        match EmailAddress::parse(raw) {
            Ok(email) => {
                let reason = reason_col
                    .and_then(|c| record.get(c))
                    .and_then(Reason::parse)
                    .unwrap_or(Reason::Manual);
                rows.push((email, reason));
            }
            Err(e) => out
                .invalid
                .push((row, format!("{raw:?} is not an address: {e}"))),
        }
    }
    let (added, existing) = registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let now = ctx.now.millis();
                let mut batch = Batch::new();
                let mut seen = std::collections::HashSet::new();
                let (mut added, mut existing) = (0u64, 0u64);
                // The counts are read once and moved by the whole file.
                let mut delta = [0i64; 4];
                for (email, reason) in rows {
                    let hash = super::hash(email.as_str());
                    if !seen.insert(hash) {
                        existing += 1;
                        continue;
                    }
                    let before = records::load(ctx.store, p, &hash)?;
                    if before.as_ref().is_some_and(|s| s.applies(now)) {
                        existing += 1;
                        continue;
                    }
                    let s = Suppression::new(email.as_str(), reason, now);
                    records::put_uncounted(&mut batch, p, before.as_ref(), &s, &mut delta)?;
                    added += 1;
                }
                records::write_counts(&mut batch, ctx.store, p, delta)?;
                ctx.store.apply(batch)?;
                Ok((added, existing))
            }),
        )
        .await?;
    out.added = added;
    out.existing = existing;
    Ok(out)
}
