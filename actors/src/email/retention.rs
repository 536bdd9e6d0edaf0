//! Expired emails: first their content (the rendered HTML and text part, custom
//! headers and the name of the send's attachments) after `email_content_days`, then the whole record and its
//! engagement after `emails_days`. Campaign stats are counted apart and stay.
//!
//! Records are walked in id order, which is creation order; the walk stops at the first
//! email created at or after the cutoff (its stored `created_at`, which follows the
//! injected clock). An email still in the outbox is skipped: it needs its content.

use crate::error::Result;
use crate::model::{EmailId, EmailStatus, OutboundEmail, ProjectId};
use crate::store::{keys, Batch, Slice, Store};

/// What a slice does to each email created before its cutoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Deletes the record and its engagement.
    Record,
    /// Keeps the record without its content.
    Content,
}

/// Whether retention took this email's content (the record shows `contentRemoved`).
pub fn content_removed(e: &OutboundEmail) -> bool {
    e.html.is_empty()
}

/// Walks at most `max` records after `after`, cutting those created before `before`.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    cut: Cut,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<Slice> {
    let prefix = keys::emails(p);
    let mut batch = Batch::new();
    let mut slice = Slice::default();
    for (walked, kv) in store.scan(&prefix, after, false).enumerate() {
        let (k, v) = kv?;
        if walked == max {
            slice.next = Some(k);
            break;
        }
        let Some(id) = keys::id_after::<EmailId>(&k, &prefix) else {
            continue;
        };
        // An unreadable record is left for an operator to look at, not deleted blind.
        let Ok(mut email) = OutboundEmail::decode(&v) else {
            continue;
        };
        if email.created_at >= before {
            break;
        }
        slice.last = Some(k.clone());
        if email.status == EmailStatus::Queued {
            continue;
        }
        match cut {
            Cut::Record => {
                batch.delete(k);
                batch.delete(keys::engagement(p, id));
                batch.delete(keys::email_text(p, id));
            }
            Cut::Content if content_removed(&email) => continue,
            Cut::Content => {
                // The send's attachments went when its last email ended (see
                // `email::sending`); the record only stops naming them.
                email.attachments_id = None;
                email.html.clear();
                email.headers.clear();
                batch.put(k, email.encode()?);
                batch.delete(keys::email_text(p, id));
            }
        }
        slice.removed += 1;
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(slice)
}

/// Whether the first email after `after` was created before `before`.
pub fn due(store: &dyn Store, p: ProjectId, before: i64, after: Option<&[u8]>) -> Result<bool> {
    match store.scan(&keys::emails(p), after, false).next() {
        Some(kv) => Ok(OutboundEmail::decode(&kv?.1).is_ok_and(|e| e.created_at < before)),
        None => Ok(false),
    }
}
