//! What the API does with webhooks: one function per operation, each a write through
//! the project's actor (answered once durable) or a read.

use serde_json::json;

use crate::error::{Error, FieldCode, FieldError, Resource, Result};
use crate::model::{EventId, ProjectId, Timestamp, WebhookId};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::store::{keys, Batch};
use crate::workflow::webhook::{is_private, WebhookClient};

use super::endpoints::Endpoints;
use super::model::{Delivery, Webhook};
use super::{records, sign, WebhookConfig};

/// The service's own events an endpoint may name (besides `*`, segment entries and
/// exits, and the project's own tracked events).
pub const SYSTEM_EVENTS: &[&str] = &[
    "email.sent",
    "email.open",
    "email.click",
    "email.bounce",
    "email.complaint",
    "contact.subscribed",
    "contact.unsubscribed",
];

/// How long the secret before a rotation keeps signing beside the new one.
const ROTATION_GRACE_MS: i64 = 24 * 3_600_000;

/// A new endpoint, as asked.
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<String>,
    pub enabled: bool,
    pub description: Option<String>,
}

/// A change to an endpoint; None leaves a field as it is.
#[derive(Default)]
pub struct WebhookPatch {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub description: Option<Option<String>>,
}

/// Whether `url` can be called: http(s), a host, and not a private address literal
/// (names are resolved and checked at every connect).
pub fn check_url(url: &str, allow_private: bool) -> Result<()> {
    let bad = |m: String| Error::field("url", FieldCode::InvalidString, m);
    crate::workflow::webhook::check_url(url).map_err(|e| bad(e.to_string()))?;
    let uri: hyper::Uri = url
        .parse()
        .map_err(|_| bad("the URL does not parse".into()))?;
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        if !allow_private && is_private(ip) {
            return Err(bad(
                "a private, loopback or link-local address; webhooks.allow_private_addresses \
                 lets an operator allow them"
                    .into(),
            ));
        }
    }
    if host.eq_ignore_ascii_case("localhost") && !allow_private {
        return Err(bad("localhost is a private address".into()));
    }
    Ok(())
}

/// Whether each name is one an endpoint can subscribe to.
pub fn check_events(events: &[String]) -> Result<()> {
    if events.is_empty() {
        return Err(Error::field(
            "events",
            FieldCode::TooSmall,
            "Name at least one event, or \"*\" for every event",
        ));
    }
    let mut errors = Vec::new();
    for (i, name) in events.iter().enumerate() {
        let known = name == "*"
            || SYSTEM_EVENTS.contains(&name.as_str())
            || (name.starts_with("segment.")
                && (name.ends_with(".entry") || name.ends_with(".exit")))
            || (!crate::model::event::is_reserved_name(name)
                && !name.trim().is_empty()
                && name.len() <= 255);
        if !known {
            let hint = crate::near_miss::meant(name, SYSTEM_EVENTS)
                .map(|m| format!("; did you mean {m:?}?"))
                .unwrap_or_default();
            errors.push(FieldError::new(
                format!("events.{i}"),
                FieldCode::InvalidEnumValue,
                format!("{name:?} is not an event an endpoint can receive{hint}"),
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Validation(errors))
    }
}

pub async fn create(
    registry: &Registry,
    config: &WebhookConfig,
    p: ProjectId,
    new: NewWebhook,
) -> Result<Webhook> {
    check_url(&new.url, config.allow_private_addresses)?;
    check_events(&new.events)?;
    let max = config.max_per_project;
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let held = records::all(ctx.store, ctx.project)?.len();
                if held >= max {
                    return Err(Error::conflict(format!(
                        "This project already has {held} webhooks (limits.max_webhooks is {max})"
                    )));
                }
                let w = Webhook {
                    id: WebhookId::new(),
                    url: new.url,
                    events: new.events,
                    enabled: new.enabled,
                    description: new.description,
                    secret: sign::new_secret(),
                    previous_secret: None,
                    created_at: ctx.now.millis(),
                    disabled_reason: None,
                    failing_since: None,
                };
                let mut batch = Batch::new();
                records::put(&mut batch, ctx.project, &w)?;
                // Delivered from now on: the project's older events are not its.
                records::put_cursor(
                    &mut batch,
                    ctx.project,
                    w.id,
                    *EventId::floor(ctx.now).as_bytes(),
                );
                ctx.store.apply(batch)?;
                Endpoints::of(ctx.states)?.forget();
                Ok(w)
            }),
        )
        .await
}

pub fn list(registry: &Registry, p: ProjectId) -> Result<Vec<Webhook>> {
    records::all(&**registry.store(), p)
}

pub fn get(registry: &Registry, p: ProjectId, w: WebhookId) -> Result<Webhook> {
    records::load(&**registry.store(), p, w)?.ok_or(Error::NotFound(Resource::Webhook))
}

pub async fn update(
    registry: &Registry,
    config: &WebhookConfig,
    p: ProjectId,
    w: WebhookId,
    patch: WebhookPatch,
) -> Result<Webhook> {
    if let Some(url) = &patch.url {
        check_url(url, config.allow_private_addresses)?;
    }
    if let Some(events) = &patch.events {
        check_events(events)?;
    }
    change(registry, p, w, move |hook, _| {
        if let Some(url) = patch.url {
            hook.url = url;
        }
        if let Some(events) = patch.events {
            hook.events = events;
        }
        if let Some(enabled) = patch.enabled {
            hook.enabled = enabled;
            if enabled {
                // Enabled again by the tenant: the service's reason is history.
                hook.disabled_reason = None;
                hook.failing_since = None;
            }
        }
        if let Some(description) = patch.description {
            hook.description = description;
        }
    })
    .await
}

/// A new secret; the old one signs beside it for a day, so receivers can switch.
pub async fn rotate_secret(registry: &Registry, p: ProjectId, w: WebhookId) -> Result<Webhook> {
    change(registry, p, w, |hook, now| {
        let old = std::mem::replace(&mut hook.secret, sign::new_secret());
        hook.previous_secret = Some((old, now.millis() + ROTATION_GRACE_MS));
    })
    .await
}

async fn change(
    registry: &Registry,
    p: ProjectId,
    w: WebhookId,
    f: impl FnOnce(&mut Webhook, Timestamp) + Send + 'static,
) -> Result<Webhook> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let mut hook = records::load(ctx.store, ctx.project, w)?
                    .ok_or(Error::NotFound(Resource::Webhook))?;
                let was_enabled = hook.enabled;
                f(&mut hook, ctx.now);
                let mut batch = Batch::new();
                records::put(&mut batch, ctx.project, &hook)?;
                if hook.enabled && !was_enabled {
                    // Enabled again: from now on, not the events of while it was off.
                    records::put_cursor(
                        &mut batch,
                        ctx.project,
                        w,
                        *EventId::floor(ctx.now).as_bytes(),
                    );
                }
                ctx.store.apply(batch)?;
                Endpoints::of(ctx.states)?.forget();
                Ok(hook)
            }),
        )
        .await
}

/// Deletes the endpoint; its deliveries still waiting are dropped from the queue (their
/// records stay until retention takes them), so it receives nothing more.
pub async fn delete(registry: &Registry, p: ProjectId, w: WebhookId) -> Result<()> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                if records::load(ctx.store, ctx.project, w)?.is_none() {
                    return Err(Error::NotFound(Resource::Webhook));
                }
                let mut batch = Batch::new();
                batch.delete(keys::webhook(ctx.project, w));
                batch.delete(keys::webhook_cursor(ctx.project, w));
                for kv in ctx
                    .store
                    .scan(&keys::deliveries(ctx.project, w), None, false)
                {
                    let (k, v) = kv?;
                    let d: Delivery = crate::store::codec::decode(&v)?;
                    if let Some(at) = d.next_attempt_at {
                        batch.delete(keys::webhook_due(at, ctx.project, w, d.id));
                    }
                    batch.delete(k);
                }
                ctx.store.apply(batch)?;
                Endpoints::of(ctx.states)?.forget();
                Ok(())
            }),
        )
        .await
}

pub fn deliveries(
    registry: &Registry,
    p: ProjectId,
    w: WebhookId,
    limit: usize,
) -> Result<Vec<Delivery>> {
    get(registry, p, w)?;
    records::recent_deliveries(&**registry.store(), p, w, limit)
}

/// What a test event got from the endpoint.
pub struct TestOutcome {
    pub delivered: bool,
    pub status_code: Option<u16>,
    pub error: Option<String>,
}

/// Sends a `webhook.test` event to the endpoint now, signed like any other, and
/// answers what it got (nothing is stored).
pub async fn test(
    registry: &Registry,
    client: &WebhookClient,
    p: ProjectId,
    w: WebhookId,
) -> Result<TestOutcome> {
    let hook = get(registry, p, w)?;
    let now = Timestamp::from(registry.clock().now());
    let id = EventId::at(now);
    let body = json!({
        "id": id.to_string(),
        "type": "webhook.test",
        "createdAt": now.to_iso(),
        "data": {"webhookId": hook.id.to_string()},
    })
    .to_string();
    let headers = super::deliver::headers(&hook, &id.to_string(), now, body.as_bytes());
    Ok(
        match client
            .call(&hook.url, "POST", &headers, body.into_bytes())
            .await
        {
            Ok(code) => TestOutcome {
                delivered: (200..300).contains(&code),
                status_code: Some(code),
                error: None,
            },
            Err(e) => TestOutcome {
                delivered: false,
                status_code: None,
                error: Some(e.to_string()),
            },
        },
    )
}
