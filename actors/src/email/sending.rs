//! Queueing emails and recording how their delivery ended.

use actix::Message;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::contact::records::{self as contacts, PatchContact, ProjectCounts, WriteCtx, WriteUnit};
use crate::error::Result;
use crate::idempotency::{self, Claim};
use crate::links::token::Issue;
use crate::links::{LinkTarget, Links};
use crate::metrics::Metrics;
use crate::model::{
    Attachment, CampaignId, Contact, ContactId, DataPatch, EmailAddress, EmailId, EmailStatus,
    Event, Mailbox, OutboundEmail, ProjectId, Timestamp,
};
use crate::project::table::ContactTable;
use crate::render::Compiled;
use crate::store::{codec, keys, Batch, Store};

/// Everything /v1/send decided, for every recipient.
pub struct SendSpec {
    pub recipients: Vec<(EmailAddress, Option<String>)>,
    /// Set on each recipient contact when given; a new contact otherwise gets false.
    pub subscribed: Option<bool>,
    pub content: Arc<Compiled>,
    pub data: Map<String, Value>,
    pub from: Mailbox,
    pub reply_to: Option<EmailAddress>,
    pub headers: Vec<(String, String)>,
    pub attachments: Vec<Attachment>,
    /// Marketing mail: not sent to unsubscribed contacts, and it carries unsubscribe
    /// (and, when tracking is on, tracking) links; a campaign's stats count it.
    pub marketing: Option<Marketing>,
    /// A campaign's test send: "[TEST] " before the subject, and sent to whoever it
    /// names, subscribed or not.
    pub test: bool,
    /// The request's Idempotency-Key: a replay answers the first reply and sends nothing.
    pub idempotency: Option<Claim>,
    /// The workflow execution whose step sends this.
    pub execution: Option<crate::model::ExecutionId>,
}

/// The links a marketing email carries (unsubscribe, and tracking when it is on).
#[derive(Clone)]
pub struct Marketing {
    pub links: Arc<Links>,
    pub project: ProjectId,
    pub campaign: Option<CampaignId>,
    /// Fixed once per send (or campaign batch): an email's unsubscribe URL is made twice
    /// (its template variable and its header) and both must be the same.
    pub issue: Issue,
}

impl Marketing {
    /// Links made now, under the project's current link generation.
    pub fn new(
        registry: &crate::project::registry::Registry,
        project: ProjectId,
        campaign: Option<CampaignId>,
    ) -> Result<Self> {
        let now = Timestamp::from(registry.clock().now());
        Ok(Marketing {
            links: registry.links().clone(),
            project,
            campaign,
            issue: Links::issue(&**registry.store(), project, now)?,
        })
    }

    fn target(&self, r: &Recipient) -> LinkTarget {
        LinkTarget {
            project: self.project,
            contact: r.contact.id,
            email: r.email_id,
            campaign: self.campaign,
            issue: self.issue,
        }
    }
}

/// The variables of API.md section 4: the contact's data, overlaid by the call's data,
/// plus `email`, `contact`, and `data` holding the same merged map.
pub fn variables(contact: &Contact, call: &Map<String, Value>) -> Value {
    let mut merged = contact.data.clone();
    for (k, v) in call {
        merged.insert(k.clone(), v.clone());
    }
    let mut vars = merged.clone();
    vars.insert("data".into(), Value::Object(merged));
    vars.insert("email".into(), Value::String(contact.email.to_string()));
    vars.insert(
        "contact".into(),
        serde_json::json!({"id": contact.id.to_string(), "email": contact.email.to_string()}),
    );
    Value::Object(vars)
}

/// A send's answer: each recipient's entry and when the send was accepted. It is what
/// an Idempotency-Key replay answers again, time included.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    pub emails: Vec<QueuedEmail>,
    /// Milliseconds since the epoch.
    pub at: i64,
}

/// A recipient as its email was rendered: the contact it was rendered for (its id
/// and data are checked again when the email is written).
pub struct Recipient {
    pub contact: Contact,
    pub name: Option<String>,
    /// Whether the contact existed when the email was rendered.
    pub existed: bool,
    /// The id its email gets (its links name it).
    pub email_id: EmailId,
}

/// A recipient and its rendered (subject, body); `queue` sets it to None when it skips
/// the recipient. `headers` are its own (List-Unsubscribe); `text` is the sender's own
/// text/plain part, rendered.
pub struct Rendered {
    pub recipient: Recipient,
    pub content: Option<(String, String)>,
    pub text: Option<String>,
    pub headers: Vec<(String, String)>,
}

/// What queueing made of a send.
pub enum Queued {
    Done(Receipt),
    /// A recipient changed (or appeared) since its email was rendered: nothing was
    /// written; render again with the current contacts.
    Stale(Box<SendSpec>),
}

/// Each recipient as the project's contact table has it now, or a contact to create
/// (with a new id) when there is none: what a send renders with.
pub fn recipients(table: &ContactTable, spec: &SendSpec, now: Timestamp) -> Result<Vec<Recipient>> {
    // An address listed twice gets one new contact, so one id.
    let mut new_ids = std::collections::HashMap::new();
    spec.recipients
        .iter()
        .map(|(email, name)| {
            let found = table.by_email(email.as_str())?;
            let existed = found.is_some();
            let contact = found.unwrap_or_else(|| Contact {
                id: *new_ids.entry(email.as_str()).or_insert_with(ContactId::new),
                email: email.clone(),
                subscribed: spec.subscribed.unwrap_or(false),
                data: Default::default(),
                created_at: now,
                updated_at: now,
            });
            Ok(Recipient {
                contact,
                name: name.clone(),
                existed,
                email_id: EmailId::new(),
            })
        })
        .collect()
}

/// A recipient with its template variables, charged and ready to render.
pub struct Job {
    pub recipient: Recipient,
    pub vars: Value,
}

/// Builds each recipient's variables (with `unsubscribeUrl` in marketing mail) and
/// charges its render against the limits; answers the jobs and the steps they were
/// charged in all.
pub fn plan(
    content: &Compiled,
    data: &Map<String, Value>,
    recipients: Vec<Recipient>,
    marketing: Option<&Marketing>,
) -> Result<(Vec<Job>, u64)> {
    let mut steps = 0u64;
    let mut jobs = Vec::with_capacity(recipients.len());
    for recipient in recipients {
        let mut vars = variables(&recipient.contact, data);
        if let (Some(m), Value::Object(map)) = (marketing, &mut vars) {
            let url = m.links.unsubscribe_url(&m.target(&recipient));
            map.insert("unsubscribeUrl".into(), Value::String(url));
        }
        steps = steps.saturating_add(content.charge(&vars)?);
        jobs.push(Job { recipient, vars });
    }
    Ok((jobs, steps))
}

/// Renders each planned email, with its marketing links; never on an actor's thread.
pub fn render(
    metrics: &Metrics,
    content: &Compiled,
    jobs: Vec<Job>,
    marketing: Option<&Marketing>,
    test: bool,
) -> Result<Vec<Rendered>> {
    jobs.into_iter()
        .map(|Job { recipient, vars }| {
            metrics.emails_rendered.add(1);
            let parts = content.render_parts_charged(vars)?;
            let (mut subject, mut html) = (parts.subject, parts.body);
            if test {
                subject = format!("[TEST] {subject}");
            }
            let mut headers = Vec::new();
            if let Some(m) = marketing {
                let target = m.target(&recipient);
                let url = m.links.unsubscribe_url(&target);
                html = m.links.decorate(&html, &target, &url);
                headers.push(("List-Unsubscribe".to_owned(), format!("<{url}>")));
                headers.push((
                    "List-Unsubscribe-Post".to_owned(),
                    "List-Unsubscribe=One-Click".to_owned(),
                ));
                if let Some(c) = m.campaign {
                    headers.extend(m.links.list_headers(
                        m.project,
                        "campaign",
                        &c.to_string(),
                        true,
                    ));
                }
            }
            Ok(Rendered {
                recipient,
                content: Some((subject, html)),
                text: parts.text,
                headers,
            })
        })
        .collect()
}

/// Upserts the recipients and writes their emails, outbox entries and the idempotency
/// record, in the project's actor. An email is written only as it was rendered: when a
/// recipient's contact is no longer the one it was rendered for (another id, other
/// data), nothing is written and the send renders again. A marketing send skips a
/// recipient who is unsubscribed now.
pub fn queue(
    ctx: &WriteCtx,
    counts: &mut ProjectCounts,
    spec: SendSpec,
    rendered: Vec<Rendered>,
) -> Result<Queued> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    if let Some(claim) = &spec.idempotency {
        if let Some(reply) = idempotency::lookup(store, p, claim, now)? {
            return Ok(Queued::Done(reply));
        }
    }
    for r in &rendered {
        let rendered_for = &r.recipient.contact;
        let changed = match ctx.table.by_email(rendered_for.email.as_str())? {
            Some(now_is) => now_is.id != rendered_for.id || now_is.data != rendered_for.data,
            // Deleted since: a new contact must not take the deleted one's id.
            None => r.recipient.existed,
        };
        if changed {
            return Ok(Queued::Stale(Box::new(spec)));
        }
    }
    // One batch for the whole send: every recipient's contact, every email, the
    // idempotent reply and their events. An address listed twice is one contact, staged
    // once (the table the next change is prepared from changes only when it applies).
    let mut unit = WriteUnit::new(*counts);
    let mut staged: HashMap<String, Contact> = HashMap::new();
    let mut suppressed: HashMap<String, crate::suppression::Reason> = HashMap::new();
    let mut rendered = rendered;
    for r in &mut rendered {
        let email = r.recipient.contact.email.clone();
        let contact = match staged.get(email.as_str()) {
            Some(c) => c.clone(),
            None => {
                let mut change = contacts::prepare_upsert(
                    ctx,
                    unit.counts(),
                    &email,
                    spec.subscribed,
                    false,
                    &DataPatch::default(),
                )?;
                // A new contact gets the id its email was rendered with.
                if change.is_new() {
                    change.after.id = r.recipient.contact.id;
                }
                unit.stage(ctx, &change)?;
                staged.insert(email.as_str().to_owned(), change.after.clone());
                change.after
            }
        };
        if spec.marketing.is_some() && !spec.test && !contact.subscribed {
            r.content = None;
        }
        // A suppressed address gets no mail of any kind, a test send's included.
        if let Some(s) = crate::suppression::lookup(store, p, email.as_str(), now.millis())? {
            r.content = None;
            suppressed.insert(email.as_str().to_owned(), s.reason);
        }
        r.recipient.contact = contact;
    }
    let mut out = Vec::with_capacity(rendered.len());
    let batch = &mut unit.batch;
    let users = rendered.iter().filter(|r| r.content.is_some()).count() as u32;
    let attachments_id = if spec.attachments.is_empty() || users == 0 {
        None
    } else {
        let id = EmailId::new();
        batch.put(keys::attachments(p, id), codec::encode(&spec.attachments)?);
        batch.put(keys::attachment_users(p, id), users.to_le_bytes().to_vec());
        Some(id)
    };
    for Rendered {
        recipient,
        content,
        text,
        headers,
    } in rendered
    {
        let contact = recipient.contact;
        let Some((subject, html)) = content else {
            let skipped = match suppressed.get(contact.email.as_str()) {
                Some(reason) => format!("{SUPPRESSED}{}", reason.as_str()),
                None => "unsubscribed".into(),
            };
            out.push(QueuedEmail {
                contact_id: contact.id,
                email: contact.email,
                email_id: None,
                skipped: Some(skipped),
            });
            continue;
        };
        let mut record = new_email(&spec, p, recipient.email_id, &contact, recipient.name, now);
        record.subject = subject;
        record.html = html;
        record.headers.extend(headers);
        record.attachments_id = attachments_id;
        put_email(batch, &record)?;
        if let Some(text) = text {
            batch.put(keys::email_text(p, record.id), text.into_bytes());
        }
        out.push(QueuedEmail {
            contact_id: contact.id,
            email: contact.email,
            email_id: Some(record.id),
            skipped: None,
        });
    }
    let receipt = Receipt {
        emails: out,
        at: now.millis(),
    };
    if let Some(claim) = &spec.idempotency {
        idempotency::record(batch, p, claim, &receipt, now)?;
    }
    *counts = unit.apply(ctx)?;
    let queued = receipt
        .emails
        .iter()
        .filter(|e| e.email_id.is_some())
        .count();
    ctx.metrics.emails_queued.add(queued as u64);
    Ok(Queued::Done(receipt))
}

/// A send's email to one contact, queued now; the caller fills in what it rendered.
pub fn new_email(
    spec: &SendSpec,
    p: ProjectId,
    id: EmailId,
    contact: &Contact,
    name: Option<String>,
    now: Timestamp,
) -> OutboundEmail {
    OutboundEmail {
        id,
        project: p,
        contact_id: contact.id,
        to: Mailbox::to(name, &contact.email),
        from: spec.from.clone(),
        reply_to: spec.reply_to.clone(),
        subject: String::new(),
        html: String::new(),
        headers: spec.headers.clone(),
        attachments: Vec::new(),
        text: None,
        attachments_id: None,
        marketing: spec.marketing.is_some(),
        campaign_id: spec.marketing.as_ref().and_then(|m| m.campaign),
        workflow_execution_id: spec.execution,
        status: EmailStatus::Queued,
        attempts: 0,
        last_error: None,
        due_at: now.millis(),
        created_at: now.millis(),
        sent_at: None,
    }
}

/// Writes a new email and its outbox entry. (A campaign's email also takes its place
/// in the campaign's queue, which the campaign writes beside it.)
pub fn put_email(batch: &mut Batch, email: &OutboundEmail) -> Result<()> {
    put_record(batch, email)?;
    batch.put(
        keys::outbox(email.due_at, email.project, email.id),
        Vec::new(),
    );
    Ok(())
}

/// Writes the email's record as it now is (a status, an error).
pub fn put_record(batch: &mut Batch, email: &OutboundEmail) -> Result<()> {
    batch.put(keys::email(email.project, email.id), email.encode()?);
    Ok(())
}

/// Takes the email out of the outbox: it will not be attempted again.
pub fn drop_from_outbox(batch: &mut Batch, email: &OutboundEmail) {
    batch.delete(keys::outbox(email.due_at, email.project, email.id));
}

/// Whether project `p` has an email `id`.
pub fn exists(store: &dyn Store, p: ProjectId, id: EmailId) -> Result<bool> {
    Ok(store.get(&keys::email(p, id))?.is_some())
}

/// One email of a send no longer needs its attachments; the last one deletes them.
/// Releases `n` of the send's users of its attachments; the last one deletes them.
pub(crate) fn release_attachments(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    id: Option<EmailId>,
    n: u32,
) -> Result<()> {
    let Some(id) = id else { return Ok(()) };
    let key = keys::attachment_users(p, id);
    let users = store
        .get(&key)?
        .and_then(|b| b.try_into().ok().map(u32::from_le_bytes))
        .unwrap_or(0);
    if users <= n {
        batch.delete(key);
        batch.delete(keys::attachments(p, id));
    } else {
        batch.put(key, (users - n).to_le_bytes().to_vec());
    }
    Ok(())
}

/// An email's own text/plain part, when its send gave one. A text that is not UTF-8
/// (a damaged record) is no text: the part is made from the HTML instead.
pub fn load_text(store: &dyn Store, p: ProjectId, id: EmailId) -> Result<Option<String>> {
    Ok(store
        .get(&keys::email_text(p, id))?
        .and_then(|b| String::from_utf8(b).ok()))
}

/// The stored attachments of a send, for delivery.
pub fn load_attachments(store: &dyn Store, p: ProjectId, id: EmailId) -> Result<Vec<Attachment>> {
    match store.get(&keys::attachments(p, id))? {
        Some(bytes) => codec::decode(&bytes),
        None => Err(crate::error::Error::storage(format!(
            "the attachments {id} of this email are missing"
        ))),
    }
}

pub fn load_email(store: &dyn Store, p: ProjectId, id: EmailId) -> Result<Option<OutboundEmail>> {
    read_email(store, p, id)?.transpose()
}

/// Email `id` of `p` as read: the outer error is a read that failed (it may work
/// again), the inner one a record that does not decode (it never will).
pub fn read_email(
    store: &dyn Store,
    p: ProjectId,
    id: EmailId,
) -> Result<Option<Result<OutboundEmail>>> {
    Ok(store
        .get(&keys::email(p, id))?
        .map(|b| OutboundEmail::decode(&b)))
}

/// What a cancelled campaign's email says when the cancel took it before it was sent.
pub const CANCELLED_BEFORE_SENT: &str = "The campaign was cancelled before this email was sent";

pub fn record(ctx: &WriteCtx, counts: &mut ProjectCounts, msg: RecordDelivery) -> Result<()> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let mut batch = Batch::new();
    batch.delete(msg.outbox_key);
    let mut email = match load_email(store, p, msg.id) {
        Ok(Some(email)) if email.status == EmailStatus::Queued => email,
        // Gone, already final (an outcome recorded twice), or unreadable: only the
        // outbox entry goes, so it is not tried again and nothing is released twice.
        Ok(_) => return store.apply(batch).map(drop),
        Err(e) => {
            tracing::error!(email = %msg.id, error = %e, "an email record cannot be read; dropping its outbox entry");
            return store.apply(batch).map(drop);
        }
    };
    email.attempts += 1;
    let mut bounced = false;
    let mut cancelled = false;
    // The contact was erased while this email was in an attempt: it is not tried
    // again, and the outcome's text (which may quote the address) is not kept.
    let erased = email.to.email.is_erased();
    let outcome = match msg.outcome {
        DeliveryOutcome::Retry { .. } | DeliveryOutcome::Failed { .. } if erased => {
            DeliveryOutcome::Failed {
                error: crate::contact::erasure_record::ERASED_ERROR.into(),
            }
        }
        DeliveryOutcome::Bounced { .. } if erased => DeliveryOutcome::Bounced {
            error: crate::contact::erasure_record::ERASED_ERROR.into(),
        },
        other => other,
    };
    let event = match outcome {
        DeliveryOutcome::Orphan => None,
        DeliveryOutcome::Sent { at } => {
            email.status = EmailStatus::Sent;
            email.sent_at = Some(at);
            email.last_error = None;
            Some("email.sent")
        }
        // A cancel leaves an email that is in an attempt to that attempt; if the attempt
        // is to be retried, the campaign's cancel takes it now rather than a later retry
        // sending it.
        DeliveryOutcome::Retry { .. } if ctx.hooks.called_off(store, p, &email)? => {
            email.status = EmailStatus::Failed;
            email.last_error = Some(CANCELLED_BEFORE_SENT.into());
            cancelled = true;
            None
        }
        DeliveryOutcome::Retry { error, due_at } => {
            email.last_error = Some(error);
            email.due_at = due_at;
            batch.put(keys::outbox(due_at, p, email.id), Vec::new());
            None
        }
        DeliveryOutcome::Failed { error } => {
            email.status = EmailStatus::Failed;
            email.last_error = Some(error);
            None
        }
        DeliveryOutcome::Bounced { error } => {
            email.status = EmailStatus::Bounced;
            email.last_error = Some(error);
            bounced = true;
            Some("email.bounce")
        }
    };
    let to = email.to.email.address().cloned();
    if email.status != EmailStatus::Queued {
        release_attachments(store, &mut batch, p, email.attachments_id, 1)?;
        // Its campaign counts it, and ends when it was the last one waiting.
        ctx.hooks
            .after_outcome(store, &mut batch, p, &email, cancelled, now)?;
    }
    batch.put(keys::email(p, email.id), email.encode()?);
    if matches!(email.status, EmailStatus::Sent | EmailStatus::Bounced) {
        crate::reputation::count(&mut batch, store, p, |t| {
            t.sent += 1;
            t.bounced += u64::from(bounced);
        })?;
    }
    let events = match (event, &to) {
        (Some(name), Some(to)) => {
            let mut ev = email_event(name, &email, to, now);
            if bounced {
                // Refused during the SMTP session: a hard bounce, in the shape a later
                // report's event has (`feedback`).
                ev.data
                    .insert("bounceType".into(), Value::String("HARD".into()));
                if let Some(e) = &email.last_error {
                    ev.data
                        .insert("diagnostic".into(), Value::String(e.clone()));
                }
                ev.data
                    .insert("source".into(), Value::String("relay".into()));
            }
            vec![ev]
        }
        _ => Vec::new(),
    };
    // The outcome, and for a bounce the contact's unsubscribe, in one batch.
    let mut unit = WriteUnit::with(batch, events, *counts);
    if let (true, Some(to)) = (bounced && !erased, &to) {
        // A dead address goes on the suppression list: no mail of any kind reaches it.
        let unit_batch = &mut unit.batch;
        let entry = crate::suppression::Suppression::new(
            to.as_str(),
            crate::suppression::Reason::HardBounce,
            now.millis(),
        )
        .for_email(Some(email.id.to_string()));
        crate::suppression::suppress(unit_batch, store, p, &entry)?;
    }
    if bounced {
        // A dead address is suppressed: no campaign mails it again.
        let patch = PatchContact {
            id: email.contact_id,
            subscribed: Some(false),
            data: DataPatch::default(),
            reason: Some("bounce".into()),
            campaign: email.campaign_id,
        };
        let staged = contacts::prepare_patch(ctx, unit.counts(), patch)
            .and_then(|change| unit.stage(ctx, &change));
        if let Err(e) = staged {
            tracing::warn!(email = %email.id, error = %e, "unsubscribing a bounced contact");
        }
    }
    *counts = unit.apply(ctx)?;
    match email.status {
        EmailStatus::Sent => ctx.metrics.emails_sent.add(1),
        EmailStatus::Bounced => ctx.metrics.emails_bounced.add(1),
        EmailStatus::Failed => ctx.metrics.emails_failed.add(1),
        _ => {}
    }
    Ok(())
}

/// A system event about an email: `emailId`, and `campaignId` for a campaign's.
pub fn email_event(name: &str, email: &OutboundEmail, to: &EmailAddress, now: Timestamp) -> Event {
    let mut ev = Event::system(name, email.contact_id, to, now);
    ev.data
        .insert("emailId".into(), Value::String(email.id.to_string()));
    if let Some(c) = email.campaign_id {
        ev.data
            .insert("campaignId".into(), Value::String(c.to_string()));
    }
    ev
}

/// Queues a send's rendered emails (see `sending::queue`): written durably before the
/// answer, or handed back to be rendered again when a recipient changed meanwhile.
#[derive(Message)]
#[rtype(result = "Result<crate::email::sending::Queued>")]
pub struct QueueEmails {
    pub spec: crate::email::sending::SendSpec,
    pub rendered: Vec<crate::email::sending::Rendered>,
}

/// How `QueuedEmail::skipped` begins for a suppressed recipient, the list's reason
/// after it (`suppressed:hard_bounce`): the stored receipt's shape stays as it was.
const SUPPRESSED: &str = "suppressed:";

/// One recipient's entry in the answer (also what an idempotent replay answers).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QueuedEmail {
    pub contact_id: ContactId,
    pub email: EmailAddress,
    /// None when the recipient was skipped.
    pub email_id: Option<crate::model::EmailId>,
    pub skipped: Option<String>,
}

impl QueuedEmail {
    /// Why the recipient is on the suppression list, when that is why it was skipped.
    pub fn suppressed(&self) -> Option<&str> {
        self.skipped.as_deref()?.strip_prefix(SUPPRESSED)
    }
}

/// The end of one delivery attempt, recorded by the dispatcher.
#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub struct RecordDelivery {
    pub id: crate::model::EmailId,
    pub outbox_key: Vec<u8>,
    pub outcome: DeliveryOutcome,
}

#[derive(Debug, Clone)]
pub enum DeliveryOutcome {
    Sent {
        at: i64,
    },
    Retry {
        error: String,
        due_at: i64,
    },
    Failed {
        error: String,
    },
    Bounced {
        error: String,
    },
    /// The outbox named an email that no longer exists.
    Orphan,
}
