//! The campaign use cases the HTTP edge calls: each checks what needs no actor (the
//! templates compile, the sender's domain is verified, the audience is not empty), then
//! makes its write in the project's actor, then starts what the write calls for (a
//! runner, a timer).

use std::sync::Arc;

use super::audience;
use super::runner::Campaigns;
use crate::campaign::records::{self as campaigns, CampaignPatch, Started};
use crate::campaign::{Campaign, CampaignStatus, NewCampaign};
use crate::domain;
use crate::email::actions::{self as send, unverified};
use crate::email::sending::Marketing;
use crate::error::{Error, FieldCode, FieldError, Result};
use crate::model::{CampaignId, EmailAddress, EmailId, ProjectId, Timestamp};
use crate::project::apply::Apply;
use crate::project::Registry;
use crate::render::TemplateCache;

/// Subject and body compile as templates (422 `template_syntax` with the line), on the
/// render pool, as a template's do when it is saved.
async fn check_content(registry: &Registry, subject: &str, body: &str) -> Result<()> {
    registry
        .renders()
        .compile(subject.to_owned(), body.to_owned())
        .await
        .map(drop)
}

fn check_sender(registry: &Registry, p: ProjectId, from: &EmailAddress) -> Result<()> {
    match domain::verified_sender(&**registry.store(), p, from)? {
        Some(_) => Ok(()),
        None => Err(unverified(from)),
    }
}

/// Makes a DRAFT campaign of `new`, with its id and times.
pub async fn create(registry: &Registry, p: ProjectId, new: NewCampaign) -> Result<Campaign> {
    let c = new.draft(Timestamp::from(registry.clock().now()));
    campaigns::check_audience(&c)?;
    check_content(registry, &c.subject, &c.body).await?;
    check_sender(registry, p, &c.from)?;
    registry
        .send(p, Apply::durable(move |ctx, _| campaigns::create(ctx, c)))
        .await
}

pub async fn update(
    registry: &Registry,
    p: ProjectId,
    id: CampaignId,
    patch: CampaignPatch,
) -> Result<Campaign> {
    let current = campaigns::get(&**registry.store(), p, id)?;
    // The status decides first (409), as the actor will again when it writes.
    if !matches!(
        current.status,
        CampaignStatus::Draft | CampaignStatus::Scheduled
    ) {
        return registry
            .send(
                p,
                Apply::durable(move |ctx, _| campaigns::update(ctx, id, patch)),
            )
            .await;
    }
    if patch.subject.is_some() || patch.body.is_some() {
        let subject = patch.subject.as_deref().unwrap_or(&current.subject);
        let body = patch.body.as_deref().unwrap_or(&current.body);
        check_content(registry, subject, body).await?;
    }
    if let Some(from) = &patch.from {
        check_sender(registry, p, from)?;
    }
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| campaigns::update(ctx, id, patch)),
        )
        .await
}

pub async fn delete(registry: &Registry, p: ProjectId, id: CampaignId) -> Result<()> {
    registry
        .send(p, Apply::durable(move |ctx, _| campaigns::delete(ctx, id)))
        .await
}

/// POST /campaigns/{id}/send: at `at`, or now.
pub async fn send(
    registry: &Registry,
    runner: &Arc<Campaigns>,
    p: ProjectId,
    id: CampaignId,
    at: Option<Timestamp>,
) -> Result<Campaign> {
    let store = registry.store().clone();
    let c = campaigns::get(&*store, p, id)?;
    if matches!(c.status, CampaignStatus::Draft | CampaignStatus::Scheduled) {
        check_sender(registry, p, &c.from)?;
        let table = registry.contacts(p);
        let now = registry.clock().now().timestamp_millis();
        let max = registry.tenant().max_filter_evaluations;
        // Only whether anyone is in it: the runner lists the audience when it sends.
        let anyone = registry
            .renders()
            .run(move || audience::any_member(&*store, &table, p, &c, now, max))
            .await??;
        if !anyone {
            return Err(Error::Validation(vec![FieldError::new(
                "type",
                FieldCode::Custom,
                "The campaign's audience has no subscribed contacts",
            )
            .suggesting(
                "Subscribe contacts to the audience, or give the campaign another one",
            )]));
        }
    }
    let started = registry
        .send(
            p,
            Apply::durable(move |ctx, _| campaigns::send(ctx, id, at)),
        )
        .await?;
    Ok(match started {
        Started::Scheduled(c) => c,
        Started::Sending(c) => {
            runner.start(p, id);
            c
        }
    })
}

/// POST /campaigns/{id}/resume: a PAUSED campaign goes on sending.
pub async fn resume(
    registry: &Registry,
    runner: &Arc<Campaigns>,
    p: ProjectId,
    id: CampaignId,
) -> Result<Campaign> {
    let c = registry
        .send(p, Apply::durable(move |ctx, _| campaigns::resume(ctx, id)))
        .await?;
    runner.start(p, id);
    Ok(c)
}

/// Why a campaign is PAUSED, when it is.
pub fn paused_reason(registry: &Registry, p: ProjectId, id: CampaignId) -> Result<Option<String>> {
    campaigns::paused_reason(&**registry.store(), p, id)
}

pub async fn cancel(registry: &Registry, p: ProjectId, id: CampaignId) -> Result<Campaign> {
    let attempts = registry.attempts().clone();
    let (c, dropped) = registry
        .send(
            p,
            Apply::durable(move |ctx, _| campaigns::cancel(ctx, id, &attempts)),
        )
        .await?;
    // Durable now: the dropped emails' outbox entries are gone for good.
    registry.attempts().forget(&dropped);
    Ok(c)
}

/// POST /campaigns/{id}/test: one email to `to`, "[TEST] " before its subject, through
/// the send path (so `to` becomes a contact, as with /v1/send), not counted in stats.
pub async fn test(
    registry: &Registry,
    cache: &Arc<TemplateCache>,
    p: ProjectId,
    id: CampaignId,
    to: EmailAddress,
) -> Result<EmailId> {
    let c = campaigns::get(&**registry.store(), p, id)?;
    check_sender(registry, p, &c.from)?;
    let content =
        send::compile_inline(registry, cache, c.subject.clone(), c.body.clone(), None).await?;
    // The campaign's own send, to one address, uncounted (no campaign in its links).
    let marketing = Marketing::new(registry, p, None)?;
    let mut spec = super::runner::spec(&c, content, marketing);
    spec.recipients = vec![(to, None)];
    spec.test = true;
    let receipt = send::send(registry, p, spec).await?;
    let first = receipt.emails.first();
    if let Some(reason) = first.and_then(|e| e.suppressed()) {
        return Err(Error::conflict(format!(
            "This address is on the suppression list ({reason}); \
             DELETE /suppressions/{{email}} takes it off"
        )));
    }
    first
        .and_then(|e| e.email_id)
        .ok_or_else(|| Error::Internal("a test send queued no email".into()))
}
