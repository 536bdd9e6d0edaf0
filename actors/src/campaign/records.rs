//! Campaign writes and reads (API.md section 9). The writes run in the project's actor
//! (through `apply::Apply`), so a campaign's status, its progress and its emails change
//! together with every other write of the project, in one order.
//!
//! Progress is durable with the emails it counts: a queued batch writes its emails,
//! their outbox entries, the stats and the new cursor in one store batch. So after a
//! crash the campaign resumes at the first recipient without an email, and no recipient
//! is queued twice.

use super::end::{self as campaign_end, finish, OPEN_COUNTER};
use super::stats as campaign_stats;
use crate::campaign::{AudienceKind, Campaign, CampaignStats, CampaignStatus};
use crate::contact::records::{read_counter, WriteCtx};
use crate::email::sending::{self, put_email, Rendered, SendSpec};
use crate::error::{Error, Resource, Result};
use crate::model::{
    CampaignId, ContactId, EmailAddress, EmailId, EmailStatus, Page, PageRequest, ProjectId,
    SegmentId, Timestamp,
};
use crate::project::attempts::Attempts;
use crate::project::counters::add_to_counter;
use crate::scheduler::{Timer, TimerKind};
use crate::segment::Group;
use crate::store::{codec, keys, paging, Batch, Store};
use crate::{FieldCode, FieldError};

pub const CAMPAIGNS_COUNTER: &str = "campaigns";

pub fn load(store: &dyn Store, p: ProjectId, id: CampaignId) -> Result<Option<Campaign>> {
    store
        .get(&keys::campaign(p, id))?
        .map(|b| Campaign::decode(&b))
        .transpose()
}

pub fn get(store: &dyn Store, p: ProjectId, id: CampaignId) -> Result<Campaign> {
    load(store, p, id)?.ok_or(Error::NotFound(Resource::Campaign))
}

/// Newest first; the cursor is the id of the last campaign of the previous page.
/// Every campaign of a project, oldest first, read as the walk goes (an export).
pub fn each(store: &dyn Store, p: ProjectId) -> impl Iterator<Item = Result<Campaign>> + '_ {
    store
        .scan(&keys::campaigns(p), None, false)
        .map(|kv| Campaign::decode(&kv?.1))
}

pub fn list(store: &dyn Store, p: ProjectId, page: &PageRequest) -> Result<Page<Campaign>> {
    let total = read_counter(store, p, CAMPAIGNS_COUNTER)?;
    paging::newest_first(
        store,
        &keys::campaigns(p),
        page,
        total,
        Campaign::decode,
        |c| c.id.to_string(),
    )
}

/// The 409 for a transition the campaign's status does not allow.
fn not_now(c: &Campaign, what: &str, allowed: &str) -> Error {
    Error::Conflict {
        message: format!(
            "The campaign is {}; it can be {what} only when {allowed}",
            c.status.as_str()
        ),
        suggestion: None,
    }
}

fn put(batch: &mut Batch, p: ProjectId, c: &Campaign) -> Result<()> {
    batch.put(keys::campaign(p, c.id), c.encode()?);
    Ok(())
}

fn check_segment(store: &dyn Store, p: ProjectId, id: Option<SegmentId>) -> Result<()> {
    match id {
        Some(id) if crate::segment::records::load(store, p, id)?.is_none() => {
            Err(Error::NotFound(Resource::Segment))
        }
        _ => Ok(()),
    }
}

pub fn create(ctx: &WriteCtx, campaign: Campaign) -> Result<Campaign> {
    let (store, p) = (ctx.store, ctx.project);
    let max = ctx.limits.max_campaigns;
    if read_counter(store, p, OPEN_COUNTER)? >= max {
        return Err(crate::project::limits::full(
            "campaigns",
            max,
            "max_campaigns",
        ));
    }
    check_segment(store, p, campaign.segment_id)?;
    let mut batch = Batch::new();
    put(&mut batch, p, &campaign)?;
    add_to_counter(store, &mut batch, p, CAMPAIGNS_COUNTER, 1)?;
    add_to_counter(store, &mut batch, p, OPEN_COUNTER, 1)?;
    store.apply(batch)?;
    Ok(campaign)
}

/// The fields a PATCH may change; None leaves a field as it is.
#[derive(Debug, Default)]
pub struct CampaignPatch {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub from: Option<EmailAddress>,
    pub from_name: Option<Option<String>>,
    pub reply_to: Option<Option<EmailAddress>>,
    pub audience: Option<AudienceKind>,
    pub segment_id: Option<Option<SegmentId>>,
    pub audience_filter: Option<Option<Group>>,
}

impl CampaignPatch {
    pub fn apply(self, c: &mut Campaign) {
        macro_rules! set {
            ($($field:ident),*) => {$(if let Some(v) = self.$field { c.$field = v; })*};
        }
        set!(
            name,
            description,
            subject,
            body,
            from,
            from_name,
            reply_to,
            audience,
            segment_id,
            audience_filter
        );
    }
}

/// Whether a campaign's audience names what its type needs (a segment for SEGMENT, a
/// filter for FILTERED) and nothing that another type would use. A segment on an ALL
/// campaign is what a client that named the audience by a field we did not read would
/// have stored (before `audienceType` was read, such a campaign mailed everyone): it is
/// refused when saved, and a stored one is refused when it is sent, rather than mailing
/// every contact instead of the segment.
pub fn check_audience(c: &Campaign) -> Result<()> {
    let missing = match c.audience {
        AudienceKind::Segment if c.segment_id.is_none() => Some("segmentId"),
        AudienceKind::Filtered if c.audience_filter.is_none() => Some("audienceFilter"),
        _ => None,
    };
    if let Some(field) = missing {
        return Err(Error::field(
            field,
            FieldCode::InvalidType,
            format!("Required when audienceType is {}", c.audience.as_str()),
        ));
    }
    let stray = match c.audience {
        AudienceKind::Segment if c.audience_filter.is_some() => {
            Some(("audienceFilter", "FILTERED"))
        }
        AudienceKind::Filtered if c.segment_id.is_some() => Some(("segmentId", "SEGMENT")),
        AudienceKind::All if c.segment_id.is_some() => Some(("segmentId", "SEGMENT")),
        AudienceKind::All if c.audience_filter.is_some() => Some(("audienceFilter", "FILTERED")),
        _ => None,
    };
    match stray {
        Some((field, kind)) => Err(Error::Validation(vec![FieldError::new(
            field,
            FieldCode::Custom,
            format!(
                "{field} is only for audienceType {kind}; this campaign's audienceType is {}",
                c.audience.as_str()
            ),
        )
        .suggesting(format!(
            "Set audienceType to {kind} to send to it, or set {field} to null"
        ))])),
        None => Ok(()),
    }
}

pub fn update(ctx: &WriteCtx, id: CampaignId, patch: CampaignPatch) -> Result<Campaign> {
    let (store, p) = (ctx.store, ctx.project);
    let mut c = get(store, p, id)?;
    if !matches!(c.status, CampaignStatus::Draft | CampaignStatus::Scheduled) {
        return Err(not_now(&c, "changed", "DRAFT or SCHEDULED"));
    }
    if let Some(s) = patch.segment_id {
        check_segment(store, p, s)?;
    }
    let mut patch = patch;
    // A new audience type drops the parts only the old one used, unless the same PATCH
    // sets them (then check_audience says what does not fit).
    if let Some(kind) = patch.audience {
        if kind != AudienceKind::Segment && patch.segment_id.is_none() {
            patch.segment_id = Some(None);
        }
        if kind != AudienceKind::Filtered && patch.audience_filter.is_none() {
            patch.audience_filter = Some(None);
        }
    }
    patch.apply(&mut c);
    check_audience(&c)?;
    c.updated_at = ctx.now;
    let mut batch = Batch::new();
    put(&mut batch, p, &c)?;
    store.apply(batch)?;
    Ok(c)
}

pub fn delete(ctx: &WriteCtx, id: CampaignId) -> Result<()> {
    let (store, p) = (ctx.store, ctx.project);
    let c = get(store, p, id)?;
    if c.status != CampaignStatus::Draft {
        return Err(not_now(&c, "deleted", "DRAFT"));
    }
    let mut batch = Batch::new();
    batch.delete(keys::campaign(p, id));
    batch.delete(keys::campaign_stats(p, id));
    add_to_counter(store, &mut batch, p, CAMPAIGNS_COUNTER, -1)?;
    add_to_counter(store, &mut batch, p, OPEN_COUNTER, -1)?;
    store.apply(batch)?;
    Ok(())
}

/// What `send` made of a campaign.
pub enum Started {
    /// Waiting for its time (its timer is armed once the write is durable).
    Scheduled(Campaign),
    /// Sending now; start its runner once the write is durable.
    Sending(Campaign),
}

fn timer(p: ProjectId, c: &Campaign, at: Timestamp) -> Timer {
    Timer {
        due: at.millis(),
        kind: TimerKind::Campaign,
        project: p,
        target: *c.id.as_bytes(),
    }
}

/// Starts sending, from DRAFT or SCHEDULED (reset progress and stats, the campaign in
/// the index of sending campaigns).
fn start(batch: &mut Batch, p: ProjectId, c: &mut Campaign, now: Timestamp) -> Result<()> {
    c.status = CampaignStatus::Sending;
    c.progress = Default::default();
    c.progress.started_at = now.millis();
    c.updated_at = now;
    batch.put(keys::sending_campaign(p, c.id), Vec::new());
    batch.put(
        keys::campaign_stats(p, c.id),
        codec::encode(&CampaignStats::default())?,
    );
    put(batch, p, c)
}

/// POST /campaigns/{id}/send: at `at` when that is later than now, else now.
pub fn send(ctx: &WriteCtx, id: CampaignId, at: Option<Timestamp>) -> Result<Started> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let mut c = get(store, p, id)?;
    if !matches!(c.status, CampaignStatus::Draft | CampaignStatus::Scheduled) {
        return Err(not_now(&c, "sent", "DRAFT or SCHEDULED"));
    }
    let mut batch = Batch::new();
    if let (CampaignStatus::Scheduled, Some(old)) = (c.status, c.scheduled_at) {
        batch.delete(timer(p, &c, old).key());
    }
    match at.filter(|at| at.millis() > now.millis()) {
        Some(at) => {
            c.status = CampaignStatus::Scheduled;
            c.scheduled_at = Some(at);
            c.updated_at = now;
            let t = timer(p, &c, at);
            batch.put(t.key(), Vec::new());
            put(&mut batch, p, &c)?;
            store.apply(batch)?;
            ctx.wakeups.arm_after_write(t);
            Ok(Started::Scheduled(c))
        }
        None => {
            start(&mut batch, p, &mut c, now)?;
            store.apply(batch)?;
            Ok(Started::Sending(c))
        }
    }
}

/// A scheduled campaign's timer fell due: it starts sending (answers true), unless it
/// was cancelled or rescheduled since. The timer's key goes either way.
pub fn begin_scheduled(ctx: &WriteCtx, t: Timer) -> Result<bool> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let mut batch = Batch::new();
    batch.delete(t.key());
    let id: CampaignId = keys::id_after(&t.target, b"")
        .ok_or_else(|| Error::Internal("a campaign timer without a campaign id".into()))?;
    let due = match load(store, p, id)? {
        Some(c)
            if c.status == CampaignStatus::Scheduled
                && c.scheduled_at.map(|s| s.millis()) == Some(t.due) =>
        {
            Some(c)
        }
        _ => None,
    };
    let started = match due {
        Some(mut c) => {
            start(&mut batch, p, &mut c, now)?;
            true
        }
        None => false,
    };
    store.apply(batch)?;
    Ok(started)
}

/// POST /campaigns/{id}/cancel. SCHEDULED goes back to DRAFT; SENDING becomes
/// CANCELLED, and its emails still in the outbox (not yet in an SMTP attempt) are
/// dropped: FAILED with the reason, counted as `cancelled`. Answers the dropped ids,
/// whose marks in `attempts` the caller forgets once the write is durable.
pub fn cancel(
    ctx: &WriteCtx,
    id: CampaignId,
    attempts: &Attempts,
) -> Result<(Campaign, Vec<EmailId>)> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let mut c = get(store, p, id)?;
    let mut batch = Batch::new();
    let mut dropped = Vec::new();
    let mut cancelled = 0u64;
    match c.status {
        CampaignStatus::Scheduled => {
            if let Some(at) = c.scheduled_at {
                batch.delete(timer(p, &c, at).key());
            }
            c.status = CampaignStatus::Draft;
            c.scheduled_at = None;
        }
        CampaignStatus::Sending | CampaignStatus::Paused => {
            c.status = CampaignStatus::Cancelled;
            batch.delete(keys::sending_campaign(p, id));
            batch.delete(keys::campaign_paused(p, id));
            let prefix = keys::campaign_queued(p, id);
            let mut n = 0u64;
            for kv in store.scan(&prefix, None, false) {
                let (key, _) = kv?;
                let Some(email_id) = keys::id_after::<EmailId>(&key, &prefix) else {
                    continue;
                };
                // Marked before it is read: from here on no attempt of it starts.
                if !attempts.cancel(email_id) {
                    continue;
                }
                dropped.push(email_id);
                batch.delete(key);
                let mut email = match sending::load_email(store, p, email_id) {
                    Ok(Some(email)) if email.status == EmailStatus::Queued => email,
                    Ok(_) => continue,
                    Err(e) => {
                        attempts.forget(&dropped);
                        return Err(e);
                    }
                };
                sending::drop_from_outbox(&mut batch, &email);
                email.status = EmailStatus::Failed;
                email.last_error = Some(sending::CANCELLED_BEFORE_SENT.into());
                sending::put_record(&mut batch, &email)?;
                n += 1;
            }
            campaign_stats::update(store, &mut batch, p, id, |s| {
                s.queued = s.queued.saturating_sub(n);
                s.cancelled += n;
            })?;
            add_to_counter(store, &mut batch, p, OPEN_COUNTER, -1)?;
            tracing::info!(project = %p, campaign = %id, dropped = n, "campaign cancelled");
            cancelled = n;
        }
        _ => return Err(not_now(&c, "cancelled", "SCHEDULED, SENDING or PAUSED")),
    }
    c.updated_at = now;
    put(&mut batch, p, &c)?;
    if let Err(e) = store.apply(batch) {
        attempts.forget(&dropped);
        return Err(e);
    }
    ctx.metrics.emails_cancelled.add(cancelled);
    Ok((c, dropped))
}

/// Stops a SENDING campaign whose rates passed the pause rule: PAUSED, out of the
/// runners' index, with `reason` kept. Answers whether it paused it.
pub fn pause(ctx: &WriteCtx, id: CampaignId, reason: String) -> Result<bool> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let Some(mut c) = sending(store, p, id)? else {
        return Ok(false);
    };
    tracing::warn!(project = %p, campaign = %id, reason, "campaign paused");
    let mut batch = Batch::new();
    c.status = CampaignStatus::Paused;
    c.updated_at = now;
    batch.delete(keys::sending_campaign(p, id));
    batch.put(keys::campaign_paused(p, id), reason.into_bytes());
    put(&mut batch, p, &c)?;
    store.apply(batch)?;
    Ok(true)
}

/// POST /campaigns/{id}/resume: a PAUSED campaign sends the rest; its pause rule counts
/// again from its stats now.
pub fn resume(ctx: &WriteCtx, id: CampaignId) -> Result<Campaign> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let mut c = get(store, p, id)?;
    if c.status != CampaignStatus::Paused {
        return Err(not_now(&c, "resumed", "PAUSED"));
    }
    let stats = campaign_stats::load(store, p, id)?;
    let mut batch = Batch::new();
    c.status = CampaignStatus::Sending;
    c.updated_at = now;
    batch.put(keys::sending_campaign(p, id), Vec::new());
    batch.delete(keys::campaign_paused(p, id));
    batch.put(keys::campaign_resumed(p, id), codec::encode(&stats)?);
    put(&mut batch, p, &c)?;
    store.apply(batch)?;
    Ok(c)
}

/// Why a campaign is PAUSED (None when it is not).
pub fn paused_reason(store: &dyn Store, p: ProjectId, id: CampaignId) -> Result<Option<String>> {
    Ok(store
        .get(&keys::campaign_paused(p, id))?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// The stats at the campaign's last resume (zero before any).
pub fn resumed_at(store: &dyn Store, p: ProjectId, id: CampaignId) -> Result<CampaignStats> {
    match store.get(&keys::campaign_resumed(p, id))? {
        Some(b) => codec::decode(&b),
        None => Ok(CampaignStats::default()),
    }
}

/// Loads a campaign that is SENDING, or says it stopped.
fn sending(store: &dyn Store, p: ProjectId, id: CampaignId) -> Result<Option<Campaign>> {
    Ok(load(store, p, id)?.filter(|c| c.status == CampaignStatus::Sending))
}

/// Writes chunks of the audience being fixed, from chunk `first` on (the first call
/// clears what an interrupted fixing left).
pub fn write_audience(
    ctx: &WriteCtx,
    id: CampaignId,
    first: u32,
    chunks: Vec<Vec<ContactId>>,
) -> Result<bool> {
    let (store, p) = (ctx.store, ctx.project);
    let Some(c) = sending(store, p, id)? else {
        return Ok(false);
    };
    if c.progress.audience_fixed {
        return Ok(false);
    }
    let mut batch = Batch::new();
    if first == 0 {
        for kv in store.scan(&keys::campaign_audience(p, id), None, false) {
            batch.delete(kv?.0);
        }
    }
    for (i, chunk) in chunks.iter().enumerate() {
        let n = first + i as u32;
        batch.put(
            keys::campaign_audience_chunk(p, id, n),
            codec::encode(chunk)?,
        );
    }
    store.apply(batch)?;
    Ok(true)
}

/// The audience is written down: `total` recipients.
pub fn fix_audience(ctx: &WriteCtx, id: CampaignId, total: u64) -> Result<Option<Campaign>> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let Some(mut c) = sending(store, p, id)? else {
        return Ok(None);
    };
    let mut batch = Batch::new();
    c.progress.audience_fixed = true;
    c.progress.total = total;
    campaign_stats::update(store, &mut batch, p, id, |s| s.total_recipients = total)?;
    if total == 0 {
        finish(store, &mut batch, p, &mut c, now)?;
    }
    put(&mut batch, p, &c)?;
    store.apply(batch)?;
    Ok(Some(c))
}

/// Ends a campaign that has queued everyone and whose outbox is empty (answers
/// whether it did): what start-up and the runner check, beside the delivery outcome
/// that normally ends it (`campaign_end::after_outcome`).
pub fn settle(ctx: &WriteCtx, id: CampaignId) -> Result<bool> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let Some(mut c) = sending(store, p, id)? else {
        return Ok(false);
    };
    let stats = campaign_stats::load(store, p, id)?;
    if !campaign_end::drained(&c, &stats) {
        return Ok(false);
    }
    let mut batch = Batch::new();
    finish(store, &mut batch, p, &mut c, now)?;
    put(&mut batch, p, &c)?;
    store.apply(batch)?;
    Ok(true)
}

/// Ends a SENDING campaign that cannot go on (its segment was deleted before the
/// audience was fixed, its stored audience is unreadable): CANCELLED, with the reason
/// logged, instead of a runner retrying for ever.
pub fn abandon(ctx: &WriteCtx, id: CampaignId, reason: &str) -> Result<()> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let Some(mut c) = sending(store, p, id)? else {
        return Ok(());
    };
    tracing::error!(project = %p, campaign = %id, reason, "campaign cannot go on; cancelled");
    let mut batch = Batch::new();
    c.status = CampaignStatus::Cancelled;
    c.updated_at = now;
    batch.delete(keys::sending_campaign(p, id));
    add_to_counter(store, &mut batch, p, OPEN_COUNTER, -1)?;
    put(&mut batch, p, &c)?;
    store.apply(batch).map(drop)
}

/// One chunk of a fixed audience.
pub fn audience_chunk(
    store: &dyn Store,
    p: ProjectId,
    id: CampaignId,
    n: u32,
) -> Result<Vec<ContactId>> {
    match store.get(&keys::campaign_audience_chunk(p, id, n))? {
        Some(b) => codec::decode(&b),
        None => Err(Error::storage(format!(
            "campaign {id}: audience chunk {n} is missing"
        ))),
    }
}

/// A queued batch of a campaign: the recipients `from..to` of its audience.
pub struct QueueBatch {
    pub id: CampaignId,
    pub from: u64,
    pub to: u64,
    pub spec: SendSpec,
    pub rendered: Vec<Rendered>,
}

/// Writes a batch's emails, unless the campaign stopped or this batch was queued
/// already (then nothing, and `None`). A recipient who unsubscribed since the batch
/// was rendered is skipped. Answers the campaign as it is after the batch.
pub fn queue_batch(ctx: &WriteCtx, b: QueueBatch) -> Result<Option<Campaign>> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let Some(mut c) = sending(store, p, b.id)? else {
        return Ok(None);
    };
    if c.progress.cursor != b.from {
        return Ok(None);
    }
    let mut batch = Batch::new();
    let (mut queued, mut skipped) = (0u64, 0u64);
    for r in b.rendered {
        let Some((subject, html)) = r.content else {
            skipped += 1;
            continue;
        };
        match ctx.table.get(r.recipient.contact.id)? {
            Some(now_is) if now_is.subscribed => {}
            _ => {
                skipped += 1;
                continue;
            }
        }
        let to = r.recipient.contact.email.as_str();
        if crate::suppression::lookup(store, p, to, now.millis())?.is_some() {
            skipped += 1;
            continue;
        }
        let contact = &r.recipient.contact;
        let mut email = sending::new_email(&b.spec, p, r.recipient.email_id, contact, None, now);
        email.subject = subject;
        email.html = html;
        email.headers.extend(r.headers);
        put_email(&mut batch, &email)?;
        // Its place in the campaign's queue, which a cancel drops.
        batch.put(keys::campaign_queued_email(p, b.id, email.id), Vec::new());
        queued += 1;
    }
    let total_skipped = skipped + (b.to - b.from).saturating_sub(queued + skipped);
    let stats = campaign_stats::update(store, &mut batch, p, b.id, |s| {
        s.queued += queued;
        s.skipped += total_skipped;
    })?;
    c.progress.cursor = b.to;
    // SENT waits for the outbox to drain: the outcome of the last email ends it.
    if campaign_end::drained(&c, &stats) {
        finish(store, &mut batch, p, &mut c, now)?;
    }
    put(&mut batch, p, &c)?;
    store.apply(batch)?;
    ctx.metrics.emails_queued.add(queued);
    Ok(Some(c))
}
