//! The emails phase of an erasure (`erasure::erase`). Emails have no index by contact, so the
//! phase walks the project's email records in slices. A contact's email stays, for the
//! campaign stats and the sender's log, with its status and times; its address becomes
//! `Recipient::Erased`, and its subject, content, headers and attachments go. One still waiting
//! in the outbox is cancelled first (FAILED, counted as `cancelled`), as a campaign's
//! cancel drops its emails: never sent after the delete. What that means to a campaign
//! (its queued count, its end) is the campaign's to say, through the core's hooks
//! (`EmailWatch::after_cancelled`), so this phase names no other feature.

use std::collections::HashMap;

use super::sending;
use crate::contact::erasure_record::{Erasure, Step, ERASED_ERROR};
use crate::error::Result;
use crate::model::{
    ContactId, EmailId, EmailStatus, OutboundEmail, ProjectId, Recipient, Timestamp,
};
use crate::project::attempts::Attempts;
use crate::project::hooks::Hooks;
use crate::store::{codec, keys, Batch, Store};

pub(crate) struct Ctx<'a> {
    pub store: &'a dyn Store,
    pub p: ProjectId,
    pub c: ContactId,
    pub erasure: &'a Erasure,
    pub attempts: &'a Attempts,
    pub hooks: &'a Hooks,
    pub now: Timestamp,
}

const CANCELLED: &str = "The contact was deleted before this email was sent";

/// Up to `left` email records past the cursor; answers the step and the emails it took
/// out of the outbox.
pub(crate) fn slice(ctx: &Ctx, batch: &mut Batch, left: usize) -> Result<(Step, Vec<EmailId>)> {
    let (store, p) = (ctx.store, ctx.p);
    let prefix = keys::emails(p);
    let mut used = 0;
    let mut last: Option<Vec<u8>> = None;
    let mut dropped = Vec::new();
    let mut cancelled: Vec<OutboundEmail> = Vec::new();
    let mut attachments: HashMap<EmailId, u32> = HashMap::new();
    let mut finished = true;
    for kv in store.scan(&prefix, ctx.erasure.after(), false) {
        let (k, v) = kv?;
        if used == left {
            finished = false;
            break;
        }
        used += 1;
        last = Some(k);
        let mut email = OutboundEmail::decode(&v)?;
        if email.contact_id != ctx.c || email.to.email.is_erased() {
            continue;
        }
        let waiting = email.status == EmailStatus::Queued;
        // Marked before the write: from here on no attempt of it starts. One already
        // in an attempt goes on; its outcome finds it anonymised.
        if waiting && ctx.attempts.cancel(email.id) {
            dropped.push(email.id);
            batch.delete(keys::outbox(email.due_at, p, email.id));
            email.status = EmailStatus::Failed;
            email.last_error = Some(CANCELLED.into());
            cancelled.push(email.clone());
            // Its share of the send's attachments is released here, as an outcome
            // would have released it.
            if let Some(a) = email.attachments_id {
                *attachments.entry(a).or_default() += 1;
            }
        }
        // An email that ended had its share released by its outcome (`sending::record`),
        // which leaves the id on the record: releasing it again would take the files
        // from other recipients still waiting. The record only stops naming them.
        if email.status != EmailStatus::Queued {
            email.attachments_id = None;
        }
        anonymise(&mut email, &ctx.erasure.email);
        batch.put(keys::email(p, email.id), email.encode()?);
        // The sender's text part may greet the contact by name, as the HTML may.
        batch.delete(keys::email_text(p, email.id));
        if let Some(mut e) = crate::email::engagement::engagement(store, p, email.id)? {
            e.to = Recipient::Erased;
            batch.put(keys::engagement(p, email.id), codec::encode(&e)?);
        }
    }
    ctx.hooks
        .after_cancelled(store, batch, p, &cancelled, ctx.now)?;
    for (a, n) in attachments {
        sending::release_attachments(store, batch, p, Some(a), n)?;
    }
    let cursor = match finished {
        true => None,
        false => Some(last.unwrap_or_else(|| ctx.erasure.cursor.clone())),
    };
    Ok((Step { used, cursor }, dropped))
}

/// What an erased email keeps: its ids, status, attempts and times.
pub fn anonymise(email: &mut OutboundEmail, address: &str) {
    email.to.email = Recipient::Erased;
    email.to.name = None;
    email.subject.clear();
    email.html.clear();
    email.headers.clear();
    // An SMTP reply often quotes the recipient.
    if let Some(err) = &mut email.last_error {
        if address.is_empty() || err.to_lowercase().contains(address) {
            *err = ERASED_ERROR.into();
        }
    }
}
