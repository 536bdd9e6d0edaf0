//! What a report does (API.md 27), in one batch in the project's actor, answered once
//! durable: a provider is told 200 only when the report can no longer be lost.
//!
//! - A hard bounce: the email becomes BOUNCED (a SENT one too: its campaign's
//!   `delivered` goes down and `bounced` up), the contact is unsubscribed (reason
//!   `bounce`), the address goes on the suppression list (`hard_bounce`), and
//!   `email.bounce {bounceType: "HARD", status, diagnostic}` is recorded.
//! - A soft bounce: `email.bounce {bounceType: "SOFT", ...}`; `soft_bounce_limit` of them
//!   within `soft_bounce_days` suppress the address for `soft_suppression_days`.
//! - A complaint: the campaign's `complained` goes up, the contact is unsubscribed
//!   (reason `complaint`), the address is suppressed (`complaint`), and
//!   `email.complaint {feedbackType}` is recorded.
//!
//! A report already applied (by its id) changes nothing more.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{FeedbackConfig, Kind, Report};
use crate::contact::records::{self as contacts, PatchContact};
use crate::error::Result;
use crate::model::{
    Contact, DataPatch, EmailAddress, EmailId, EmailStatus, Event, OutboundEmail, ProjectId,
};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::project::unit::WriteUnit;
use crate::project::write::WriteCtx;
use crate::store::{keys, Batch};
use crate::suppression::{self, Reason, Suppression};

const DAY_MS: i64 = 86_400_000;

/// What became of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It changed what it says it changes.
    Done,
    /// The same report was applied before.
    Duplicate,
    /// It names no email and no contact of the project.
    Unmatched,
}

/// The project that holds email `id` (ids are unique across projects).
pub(crate) fn project_of_email(registry: &Registry, id: EmailId) -> Result<Option<ProjectId>> {
    let store = registry.store();
    for project in crate::directory::Projects::new(store.clone()).list()? {
        if crate::email::sending::exists(&**store, project.id, id)? {
            return Ok(Some(project.id));
        }
    }
    Ok(None)
}

/// Where a report applies: the project and email its `Message-ID` names (looked up in
/// every project: a callback carries no key); else, by its recipient, a bounce in every
/// project that has a contact with that address (an address that does not take mail does
/// not, whoever sends), and a complaint only in the one project that has it (a
/// complaint is about a sender: one it cannot be pinned on is dropped).
pub fn locate(registry: &Registry, report: &Report) -> Result<Vec<(ProjectId, Option<EmailId>)>> {
    if let Some(id) = report.message_id.as_deref().and_then(super::email_id_of) {
        if let Some(p) = project_of_email(registry, id)? {
            return Ok(vec![(p, Some(id))]);
        }
    }
    let Some(to) = report.recipient.as_deref() else {
        return Ok(Vec::new());
    };
    let Ok(address) = EmailAddress::parse(to.trim()) else {
        return Ok(Vec::new());
    };
    let store = registry.store();
    let mut found = Vec::new();
    for project in crate::directory::Projects::new(store.clone()).list()? {
        if crate::contact::records::find_id_by_email(&**store, project.id, address.as_str())?
            .is_some()
        {
            found.push((project.id, None));
        }
    }
    if report.kind == Kind::Complaint && found.len() > 1 {
        return Ok(Vec::new());
    }
    Ok(found)
}

/// Keeps a message that could not be read, in project `p`, durably: one per email (a
/// token holder cannot fill the disk with them). Answers whether it kept it.
pub(crate) async fn quarantine(
    registry: &Registry,
    p: ProjectId,
    email: EmailId,
    message: Vec<u8>,
) -> Result<bool> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let marker = keys::feedback_quarantined_email(p, email);
                if ctx.store.get(&marker)?.is_some() {
                    return Ok(false);
                }
                let mut batch = Batch::new();
                batch.put(keys::feedback_quarantine(p, &uuid::Uuid::now_v7()), message);
                batch.put(marker, Vec::new());
                ctx.store.apply(batch)?;
                ctx.metrics.feedback_quarantined.add(1);
                Ok(true)
            }),
        )
        .await
}

/// Deletes project `p`'s quarantined reports that came before `before_ms`; how many.
pub(crate) async fn purge_quarantine(
    registry: &Registry,
    p: ProjectId,
    before_ms: i64,
) -> Result<usize> {
    registry
        .send(
            p,
            Apply::applied(move |ctx, _| {
                let mut batch = Batch::new();
                let mut n = 0;
                for kv in ctx.store.scan(&keys::feedback_quarantined(p), None, false) {
                    let (k, _) = kv?;
                    let Some(id) = k
                        .len()
                        .checked_sub(16)
                        .and_then(|at| uuid::Uuid::from_slice(&k[at..]).ok())
                    else {
                        continue;
                    };
                    let Some((secs, _)) = id.get_timestamp().map(|t| t.to_unix()) else {
                        continue;
                    };
                    // Keys sort by time: the first young one ends the walk.
                    if (secs as i64) * 1000 >= before_ms {
                        break;
                    }
                    batch.delete(k);
                    n += 1;
                }
                if n > 0 {
                    ctx.store.apply(batch)?;
                }
                Ok(n)
            }),
        )
        .await
}

/// Applies `report` to email `email` (or, without one, to its recipient) of project `p`.
pub async fn apply(
    registry: &Registry,
    config: &FeedbackConfig,
    p: ProjectId,
    email: Option<EmailId>,
    report: Report,
) -> Result<Applied> {
    let config = config.clone();
    registry
        .send(
            p,
            Apply::durable(move |ctx, counts| {
                let mut unit = WriteUnit::new(*counts);
                let applied = in_actor(ctx, &mut unit, &config, email, &report)?;
                if applied == Applied::Done {
                    *counts = unit.apply(ctx)?;
                }
                Ok(applied)
            }),
        )
        .await
}

fn seen_key(p: ProjectId, report: &Report) -> Vec<u8> {
    let id: [u8; 32] = Sha256::digest(format!("{}\n{}", report.source, report.id)).into();
    keys::feedback_seen(p, &id)
}

fn seen_key_of_email(p: ProjectId, email: EmailId, kind: Kind) -> Vec<u8> {
    let kind = match kind {
        Kind::Hard => "hard",
        Kind::Soft => "soft",
        Kind::Complaint => "complaint",
    };
    let id: [u8; 32] = Sha256::digest(format!("email\n{email}\n{kind}")).into();
    keys::feedback_seen(p, &id)
}

fn in_actor(
    ctx: &WriteCtx,
    unit: &mut WriteUnit,
    config: &FeedbackConfig,
    email_id: Option<EmailId>,
    report: &Report,
) -> Result<Applied> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let email = match email_id {
        Some(id) => crate::email::sending::load_email(store, p, id)?,
        None => None,
    };
    // One report of each kind per email, whatever its id says (a report resent with a
    // byte changed, the same bounce by mail and by callback, a deferral retried); a
    // report about no email counts once by its own id.
    let seen = match &email {
        Some(e) => seen_key_of_email(p, e.id, report.kind),
        None => seen_key(p, report),
    };
    if store.get(&seen)?.is_some() {
        return Ok(Applied::Duplicate);
    }
    // The recipient: the email's. The address a report claims counts only for a report
    // that names no email of ours (a provider's callback matched by recipient): a
    // report for an email whose contact was erased changes nothing.
    let address = match &email {
        Some(e) => match e.to.email.address() {
            Some(a) => a.clone(),
            None => return Ok(Applied::Unmatched),
        },
        None => match report
            .recipient
            .as_deref()
            .and_then(|r| EmailAddress::parse(r.trim()).ok())
        {
            Some(a) => a,
            None => return Ok(Applied::Unmatched),
        },
    };
    let contact = ctx.table.by_email(address.as_str())?;
    if email.is_none() && contact.is_none() {
        return Ok(Applied::Unmatched);
    }
    match report.kind {
        Kind::Hard => ctx.metrics.feedback_hard.add(1),
        Kind::Soft => ctx.metrics.feedback_soft.add(1),
        Kind::Complaint => ctx.metrics.feedback_complaint.add(1),
    }
    let batch = &mut unit.batch;
    batch.put(seen, now.millis().to_le_bytes().to_vec());
    // A late bounce of an email counted as delivered, and a complaint, move the rates.
    let late_bounce = report.kind == Kind::Hard
        && email
            .as_ref()
            .is_some_and(|e| e.status == EmailStatus::Sent);
    if late_bounce || report.kind == Kind::Complaint {
        crate::reputation::count(batch, store, p, |t| match report.kind {
            Kind::Complaint => t.complained += 1,
            _ => t.bounced += 1,
        })?;
    }
    let email_ref = email.as_ref().map(|e| e.id.to_string());
    let mut unsubscribe = None;
    match report.kind {
        Kind::Hard => {
            if let Some(e) = &email {
                bounce_email(ctx, batch, e)?;
            }
            suppression::suppress(
                batch,
                store,
                p,
                &Suppression::new(address.as_str(), Reason::HardBounce, now.millis())
                    .for_email(email_ref)
                    .until(None),
            )?;
            unsubscribe = Some("bounce");
        }
        Kind::Soft => {
            if soft_limit_reached(store, batch, p, config, address.as_str(), now.millis())? {
                let until = now.millis() + config.soft_suppression_days as i64 * DAY_MS;
                suppression::suppress(
                    batch,
                    store,
                    p,
                    &Suppression::new(address.as_str(), Reason::SoftBounce, now.millis())
                        .for_email(email_ref)
                        .until(Some(until)),
                )?;
            }
        }
        Kind::Complaint => {
            if let Some(c) = email.as_ref().and_then(|e| e.campaign_id) {
                crate::campaign::stats::update(store, batch, p, c, |s| s.complained += 1)?;
            }
            suppression::suppress(
                batch,
                store,
                p,
                &Suppression::new(address.as_str(), Reason::Complaint, now.millis())
                    .for_email(email_ref)
                    .until(None),
            )?;
            unsubscribe = Some("complaint");
        }
    }
    if let Some(contact) = &contact {
        unit.events
            .push(event(report, email.as_ref(), contact, &address, now));
        if let (Some(reason), true) = (unsubscribe, contact.subscribed) {
            let patch = PatchContact {
                id: contact.id,
                subscribed: Some(false),
                data: DataPatch::default(),
                reason: Some(reason.into()),
                campaign: email.as_ref().and_then(|e| e.campaign_id),
            };
            let change = contacts::prepare_patch(ctx, unit.counts(), patch)?;
            unit.stage(ctx, &change)?;
        }
    }
    Ok(Applied::Done)
}

/// A hard bounce of an email the relay had taken: BOUNCED, and its campaign's counts
/// moved from delivered to bounced. An email still in the outbox, or bounced or failed
/// already, keeps its status.
fn bounce_email(ctx: &WriteCtx, batch: &mut Batch, email: &OutboundEmail) -> Result<()> {
    if email.status != EmailStatus::Sent {
        return Ok(());
    }
    let mut e = email.clone();
    e.status = EmailStatus::Bounced;
    crate::email::sending::put_record(batch, &e)?;
    if let Some(c) = e.campaign_id {
        crate::campaign::stats::update(ctx.store, batch, ctx.project, c, |s| {
            s.delivered = s.delivered.saturating_sub(1);
            s.bounced += 1;
        })?;
    }
    ctx.metrics.emails_bounced.add(1);
    Ok(())
}

/// Counts a soft bounce of `address`; true when it makes `soft_bounce_limit` within
/// `soft_bounce_days` (the count then starts again).
fn soft_limit_reached(
    store: &dyn crate::store::Store,
    batch: &mut Batch,
    p: ProjectId,
    config: &FeedbackConfig,
    address: &str,
    now_ms: i64,
) -> Result<bool> {
    let key = keys::soft_bounces(p, &suppression::hash(address));
    let since = now_ms - config.soft_bounce_days as i64 * DAY_MS;
    let mut times: Vec<i64> = store
        .get(&key)?
        .map(|b| {
            b.chunks_exact(8)
                .filter_map(|c| c.try_into().ok().map(i64::from_le_bytes))
                .collect()
        })
        .unwrap_or_default();
    times.retain(|t| *t > since);
    times.push(now_ms);
    if times.len() as u32 >= config.soft_bounce_limit.max(1) {
        batch.delete(key);
        return Ok(true);
    }
    batch.put(
        key,
        times
            .iter()
            .flat_map(|t| t.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    Ok(false)
}

/// `email.bounce` or `email.complaint`, with what the report said.
fn event(
    report: &Report,
    email: Option<&OutboundEmail>,
    contact: &Contact,
    address: &EmailAddress,
    now: crate::model::Timestamp,
) -> Event {
    let name = match report.kind {
        Kind::Complaint => "email.complaint",
        _ => "email.bounce",
    };
    let mut ev = match email {
        Some(e) => crate::email::sending::email_event(name, e, address, now),
        None => Event::system(name, contact.id, address, now),
    };
    let mut put = |k: &str, v: Option<&str>| {
        if let Some(v) = v {
            ev.data.insert(k.into(), Value::String(v.to_owned()));
        }
    };
    match report.kind {
        Kind::Hard => put("bounceType", Some("HARD")),
        Kind::Soft => put("bounceType", Some("SOFT")),
        Kind::Complaint => put(
            "feedbackType",
            Some(report.feedback_type.as_deref().unwrap_or("abuse")),
        ),
    }
    put("status", report.status.as_deref());
    put("diagnostic", report.diagnostic.as_deref());
    put("source", Some(report.source));
    ev
}
