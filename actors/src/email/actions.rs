//! The send use case: what /v1/send (and, later, a campaign or a workflow step) calls to
//! queue emails. Each recipient's email is rendered here, off the project actor, with
//! the contact as the project's contact table has it; the actor then upserts the
//! recipients and writes the emails in one visit, unless a recipient changed since it
//! was read (then the send renders again). So a costly template never holds an arbiter
//! that other projects share, and an ordinary send costs one actor visit.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::sending::{self, Marketing, Queued, Receipt, SendSpec};
use crate::domain;
use crate::email::sending::QueueEmails;
use crate::error::{Error, FieldCode, FieldError, Result};
use crate::idempotency::Claim;
use crate::model::{
    Attachment, EmailAddress, Mailbox, ProjectId, Template, TemplateId, TemplateKind, Timestamp,
};
use crate::project::registry::Registry;
use crate::render::{Compiled, TemplateCache};
use crate::template::records as templates;

/// A send as a caller asks for it (/v1/send parses one from its body): the use case
/// decides the rest from the stored template and the project's domains.
pub struct SendRequest {
    pub recipients: Vec<(EmailAddress, Option<String>)>,
    pub template: Option<TemplateId>,
    pub subject: Option<String>,
    pub body: Option<String>,
    /// The text/plain part, a template like the body (not HTML-escaped); None: made
    /// from the HTML at delivery.
    pub text: Option<String>,
    /// An address and its display name.
    pub from: Option<(EmailAddress, Option<String>)>,
    /// A display name for the sender, over the one of `from` or the template.
    pub from_name: Option<String>,
    pub reply_to: Option<EmailAddress>,
    /// Set on each recipient contact when given; a new contact otherwise gets false.
    pub subscribed: Option<bool>,
    pub data: Map<String, Value>,
    pub headers: Vec<(String, String)>,
    pub attachments: Vec<Attachment>,
    pub idempotency: Option<Claim>,
    /// The workflow execution whose SEND_EMAIL step this is.
    pub execution: Option<crate::model::ExecutionId>,
}

/// The rules of a send (API.md section 5): the template and what it supplies, the
/// subject and body a send without one must bring, the sender's verified domain, the
/// compiled content, and the marketing flag; then `send` queues it.
pub async fn send_request(
    registry: &Registry,
    cache: &Arc<TemplateCache>,
    project: ProjectId,
    req: SendRequest,
) -> Result<Receipt> {
    let store = registry.store().clone();
    // A replay costs a point read: no template is loaded, compiled or rendered.
    if let Some(receipt) = replay(registry, project, req.idempotency.as_ref())? {
        return Ok(receipt);
    }
    let template = match req.template {
        None => None,
        Some(id) => Some(
            templates::load(&*store, project, id)?
                .ok_or(Error::NotFound(crate::Resource::Template))?,
        ),
    };
    let mut errors = Vec::new();
    if template.is_none() {
        for (field, given) in [
            ("subject", req.subject.is_some()),
            ("body", req.body.is_some()),
        ] {
            if !given {
                errors.push(FieldError::new(
                    field,
                    FieldCode::InvalidType,
                    "Required when no template is given",
                ));
            }
        }
    }
    let from = req.from.clone().or_else(|| {
        template
            .as_ref()
            .and_then(|t| t.from.clone().map(|e| (e, t.from_name.clone())))
    });
    if from.is_none() {
        errors.push(FieldError::new(
            "from",
            FieldCode::InvalidType,
            "Required unless the template has a from address",
        ));
    }
    let Some((from_addr, from_name)) = from.filter(|_| errors.is_empty()) else {
        return Err(Error::Validation(errors));
    };
    if domain::verified_sender(&*store, project, &from_addr)?.is_none() {
        return Err(unverified(&from_addr));
    }
    let content = compile(registry, cache, &template, &req).await?;
    let spec = SendSpec {
        recipients: req.recipients,
        subscribed: req.subscribed,
        content,
        data: req.data,
        from: Mailbox::new(req.from_name.or(from_name), &from_addr),
        reply_to: req
            .reply_to
            .or_else(|| template.as_ref().and_then(|t| t.reply_to.clone())),
        headers: req.headers,
        attachments: req.attachments,
        marketing: template
            .as_ref()
            .filter(|t| t.kind == TemplateKind::Marketing)
            .map(|_| Marketing::new(registry, project, None))
            .transpose()?,
        test: false,
        idempotency: req.idempotency,
        execution: req.execution,
    };
    send(registry, project, spec).await
}

/// The first answer to a send with this `Idempotency-Key` and body, when there is one
/// (a 409 for the key with another body). A read, off the actor: the actor checks again
/// before it writes, so two requests racing with one key still write once.
pub fn replay(
    registry: &Registry,
    project: ProjectId,
    claim: Option<&Claim>,
) -> Result<Option<Receipt>> {
    let Some(claim) = claim else { return Ok(None) };
    let now = Timestamp::from(registry.clock().now());
    crate::idempotency::lookup(&**registry.store(), project, claim, now)
}

/// The 422 for a sender whose domain the project has not verified.
pub fn unverified(from: &EmailAddress) -> Error {
    let domain = from.domain();
    Error::Validation(vec![FieldError::new(
        "from",
        FieldCode::UnverifiedDomain,
        format!("The domain {domain} is not a verified domain of this project"),
    )
    .suggesting(format!(
        "Add {domain} with POST /domains, publish its DNS records, then verify it with \
         POST /domains/{{id}}/verify"
    ))])
}

/// The send's subject, body and text part (given ones over the template's), compiled: from the
/// cache, or on the render pool (compiling tenant text is work too).
async fn compile(
    registry: &Registry,
    cache: &Arc<TemplateCache>,
    template: &Option<Template>,
    req: &SendRequest,
) -> Result<Arc<Compiled>> {
    if let (Some(t), None, None, None) = (template, &req.subject, &req.body, &req.text) {
        if let Some(c) = cache.cached(t) {
            return Ok(c);
        }
        let (cache, t) = (cache.clone(), t.clone());
        return registry.renders().run(move || cache.get(&t)).await?;
    }
    let pick = |given: &Option<String>, stored: fn(&Template) -> &str| {
        given
            .clone()
            .or_else(|| template.as_ref().map(|t| stored(t).to_owned()))
            .unwrap_or_default()
    };
    let subject = pick(&req.subject, |t| t.subject.as_str());
    let body = pick(&req.body, |t| t.body.as_str());
    let text = req
        .text
        .clone()
        .or_else(|| template.as_ref().and_then(|t| t.text.clone()));
    compile_inline(registry, cache, subject, body, text).await
}

/// A subject, body and text part given inline, compiled: from the cache, or on the
/// render pool.
pub async fn compile_inline(
    registry: &Registry,
    cache: &Arc<TemplateCache>,
    subject: String,
    body: String,
    text: Option<String>,
) -> Result<Arc<Compiled>> {
    if let Some(c) = cache.cached_inline(&subject, &body, text.as_deref()) {
        return Ok(c);
    }
    let cache = cache.clone();
    registry
        .renders()
        .run(move || cache.inline(&subject, &body, text.as_deref()))
        .await?
}

/// Charged steps of one send's renders that run inline rather than on the pool.
const INLINE_STEPS: u64 = 5_000;

/// Renders of one send before it gives up on recipients that keep changing.
const MAX_RENDERS: usize = 5;

pub async fn send(registry: &Registry, project: ProjectId, spec: SendSpec) -> Result<Receipt> {
    let table = registry.loaded_contacts(project).await?;
    let mut spec = spec;
    for _ in 0..MAX_RENDERS {
        let now = Timestamp::from(registry.clock().now());
        let recipients = sending::recipients(&table, &spec, now)?;
        // Each recipient's render is charged first (a 422 here means it would pass a
        // limit). Renders charged at a few thousand steps in all take microseconds:
        // they run right here (an HTTP worker, never an actor). Costlier ones go to the
        // render pool, so a slow one holds neither an actor nor a worker that other
        // projects' requests need.
        let content = spec.content.clone();
        let (marketing, test) = (spec.marketing.clone(), spec.test);
        let (jobs, steps) = sending::plan(&content, &spec.data, recipients, marketing.as_ref())?;
        let metrics = registry.metrics().clone();
        let rendered = if steps <= INLINE_STEPS {
            sending::render(&metrics, &content, jobs, marketing.as_ref(), test)?
        } else {
            registry
                .renders()
                .run(move || sending::render(&metrics, &content, jobs, marketing.as_ref(), test))
                .await??
        };
        match registry
            .send(project, QueueEmails { spec, rendered })
            .await?
        {
            Queued::Done(receipt) => return Ok(receipt),
            Queued::Stale(back) => spec = *back,
        }
    }
    // Recipients that change faster than their emails render: let the client come back.
    Err(Error::Busy {
        retry_after_secs: 1,
    })
}
