//! The delivery loop of a node: every 200 ms, and whenever an attempt ends (a slot is
//! free again), it walks the queue of deliveries due
//! (`keys::webhook_due`, by time), takes those of the projects this node owns, and
//! POSTs each to its endpoint, at most `max_in_flight` at once and
//! `max_in_flight_per_endpoint` per endpoint, so a slow or dead endpoint holds a few
//! slots, not the loop, and never an actor or an HTTP worker. Each outcome is written
//! through the project's actor: delivered, retried on the schedule, failed for good, or
//! the endpoint disabled (a 410, or failures for `disable_after_hours`). A delivery
//! whose outcome a `kill -9` lost is still in the queue and is sent again, under the
//! same `webhook-id`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Result;
use crate::model::{DeliveryId, ProjectId, Timestamp, WebhookId};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::store::{keys, Batch};
use crate::workflow::webhook::WebhookClient;

use super::model::{DeliveryStatus, Webhook};
use super::{records, sign, WebhookConfig};

const ROUND: Duration = Duration::from_millis(200);

/// Queue entries one round looks at, at most: the due ones come first, and a backlog of
/// thousands for a few busy endpoints must not make every round walk all of it (a
/// round runs each time an attempt ends).
const ROUND_SCAN: usize = 512;

/// One endpoint's deliveries (and when each was due), sent one after another.
type Lane = (ProjectId, WebhookId, Vec<(DeliveryId, i64)>);

/// Deliveries one lane sends, one after another, before its slot goes back.
const LANE: usize = 64;

/// The headers of a delivery (and of a test event).
pub fn headers(hook: &Webhook, id: &str, now: Timestamp, body: &[u8]) -> Vec<(String, String)> {
    let ts = now.millis().div_euclid(1000);
    vec![
        ("content-type".into(), "application/json".into()),
        ("webhook-id".into(), id.to_owned()),
        ("webhook-timestamp".into(), ts.to_string()),
        (
            "webhook-signature".into(),
            sign::header(&hook.signing_secrets(now.millis()), id, ts, body),
        ),
    ]
}

/// What an attempt got.
enum Answer {
    Status(u16),
    NoAnswer(String),
}

pub struct Deliverer {
    registry: Registry,
    client: Arc<WebhookClient>,
    config: WebhookConfig,
    in_flight: Mutex<HashSet<DeliveryId>>,
    per_endpoint: Mutex<HashMap<WebhookId, usize>>,
    /// Rung when an attempt ends: its slot can take the next delivery at once.
    freed: tokio::sync::Notify,
}

impl Deliverer {
    /// Starts the loop on the current runtime; it ends when the engine stops.
    pub fn start(
        registry: Registry,
        client: Arc<WebhookClient>,
        config: WebhookConfig,
    ) -> Arc<Deliverer> {
        let me = Arc::new(Deliverer {
            registry,
            client,
            config,
            in_flight: Mutex::default(),
            per_endpoint: Mutex::default(),
            freed: tokio::sync::Notify::new(),
        });
        let looping = me.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(ROUND) => {}
                    _ = looping.freed.notified() => {}
                    _ = looping.registry.drain().stopped() => return,
                }
                if let Err(e) = looping.round() {
                    tracing::warn!(error = %e, "a webhook delivery round failed; trying again");
                }
            }
        });
        me
    }

    /// Hands the due deliveries this node may send to lanes: a lane is a task that
    /// sends one endpoint's deliveries one after another, at most `LANE` of them, and
    /// an endpoint has at most `max_in_flight_per_endpoint` lanes. One walk of the queue
    /// so feeds hundreds of attempts (a walk per attempt cost more than the attempts).
    fn round(self: &Arc<Self>) -> Result<()> {
        let now = Timestamp::from(self.registry.clock().now()).millis();
        let store = self.registry.store().clone();
        // The lanes this round opened, by endpoint: later entries join their queue.
        let mut opened: HashMap<WebhookId, Vec<usize>> = HashMap::new();
        let mut lanes: Vec<Lane> = Vec::new();
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            let mut per = self.per_endpoint.lock().unwrap_or_else(|e| e.into_inner());
            let mut lanes_in_all: usize = per.values().sum();
            for kv in store.scan(keys::WEBHOOK_DUE, None, false).take(ROUND_SCAN) {
                let (k, _) = kv?;
                let Some((due, p, w, d)) = keys::parse_webhook_due(&k) else {
                    continue;
                };
                if due > now {
                    break;
                }
                if in_flight.contains(&d) || !self.registry.ownership().owns(p) {
                    continue;
                }
                let open = opened.entry(w).or_default();
                if let Some(&i) = open.iter().find(|&&i| lanes[i].2.len() < LANE) {
                    lanes[i].2.push((d, due));
                    in_flight.insert(d);
                    continue;
                }
                let n = per.entry(w).or_default();
                if *n >= self.config.max_in_flight_per_endpoint {
                    continue;
                }
                if lanes_in_all >= self.config.max_in_flight {
                    break;
                }
                *n += 1;
                lanes_in_all += 1;
                in_flight.insert(d);
                open.push(lanes.len());
                lanes.push((p, w, vec![(d, due)]));
            }
        }
        for (p, w, queue) in lanes {
            let me = self.clone();
            tokio::spawn(async move {
                let mut rest = queue.iter();
                for &(d, due) in rest.by_ref() {
                    let sent = me.attempt(p, w, d, due).await;
                    me.release(&[d]);
                    match sent {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => {
                            tracing::warn!(project = %p, delivery = %d, error = %e, "a webhook delivery");
                            break;
                        }
                    }
                }
                // An endpoint that failed keeps the rest of its lane for a later round.
                let left: Vec<DeliveryId> = rest.map(|(d, _)| *d).collect();
                me.release(&left);
                {
                    let mut per = me.per_endpoint.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(n) = per.get_mut(&w) {
                        *n = n.saturating_sub(1);
                        if *n == 0 {
                            per.remove(&w);
                        }
                    }
                }
                me.freed.notify_one();
            });
        }
        Ok(())
    }

    fn release(&self, done: &[DeliveryId]) {
        if done.is_empty() {
            return;
        }
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        for d in done {
            in_flight.remove(d);
        }
    }

    /// Sends one delivery and records what it got; true when the endpoint took it (or
    /// it had nothing to send), false when the endpoint failed.
    async fn attempt(&self, p: ProjectId, w: WebhookId, d: DeliveryId, due: i64) -> Result<bool> {
        let store = self.registry.store().clone();
        let delivery = records::load_delivery(&*store, p, w, d)?;
        let hook = records::load(&*store, p, w)?;
        let answer = match (&delivery, &hook) {
            (Some(delivery), Some(hook))
                if delivery.status == DeliveryStatus::Pending && hook.enabled =>
            {
                let now = Timestamp::from(self.registry.clock().now());
                let id = delivery.event.to_string();
                let body = delivery.payload.clone().into_bytes();
                let headers = headers(hook, &id, now, &body);
                Some(
                    match self.client.call(&hook.url, "POST", &headers, body).await {
                        Ok(code) => Answer::Status(code),
                        Err(e) => {
                            tracing::debug!(project = %p, delivery = %d, detail = %e.detail(), "a webhook got no answer");
                            Answer::NoAnswer(e.to_string())
                        }
                    },
                )
            }
            // Gone, done, or its endpoint disabled: it leaves the queue.
            _ => None,
        };
        let took = matches!(answer, None | Some(Answer::Status(200..=299)));
        let config = self.config.clone();
        self.registry
            .send(
                p,
                Apply::durable(move |ctx, _| record(ctx, &config, w, d, due, answer)),
            )
            .await?;
        Ok(took)
    }
}

/// Writes what an attempt got, in the project's actor.
fn record(
    ctx: &crate::project::write::WriteCtx,
    config: &WebhookConfig,
    w: WebhookId,
    d: DeliveryId,
    due: i64,
    answer: Option<Answer>,
) -> Result<()> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now.millis());
    let mut batch = Batch::new();
    batch.delete(keys::webhook_due(due, p, w, d));
    let Some(mut delivery) = records::load_delivery(store, p, w, d)? else {
        return store.apply(batch);
    };
    if delivery.status != DeliveryStatus::Pending || delivery.next_attempt_at != Some(due) {
        // Recorded already (an attempt that raced a restart's).
        return store.apply(batch);
    }
    let mut hook = records::load(store, p, w)?;
    let hook_before = hook.clone();
    delivery.next_attempt_at = None;
    match answer {
        None => delivery.status = DeliveryStatus::Cancelled,
        Some(answer) => {
            delivery.attempts += 1;
            delivery.attempted_at = Some(now);
            let (code, error) = match answer {
                Answer::Status(code) => (Some(code), None),
                Answer::NoAnswer(e) => (None, Some(e)),
            };
            delivery.status_code = code;
            delivery.error = error;
            match code {
                Some(200..=299) => {
                    ctx.metrics.webhooks_delivered.add(1);
                    delivery.status = DeliveryStatus::Delivered;
                    if let Some(h) = hook.as_mut() {
                        h.failing_since = None;
                    }
                }
                Some(410) => {
                    ctx.metrics.webhooks_failed.add(1);
                    delivery.status = DeliveryStatus::Failed;
                    if let Some(h) = hook.as_mut() {
                        h.enabled = false;
                        h.disabled_reason = Some("the endpoint answered 410 Gone".into());
                    }
                }
                _ => {
                    let failing_since = hook
                        .as_mut()
                        .map(|h| *h.failing_since.get_or_insert(now))
                        .unwrap_or(now);
                    let hours = config.disable_after_hours as i64 * 3_600_000;
                    if config.disable_after_hours > 0 && now - failing_since >= hours {
                        if let Some(h) = hook.as_mut() {
                            h.enabled = false;
                            h.disabled_reason = Some(format!(
                                "every delivery failed for {} hours",
                                config.disable_after_hours
                            ));
                        }
                    }
                    match config.retry_seconds.get(delivery.attempts as usize - 1) {
                        Some(wait) => {
                            ctx.metrics.webhooks_retried.add(1);
                            let next = now + (*wait as i64) * 1000;
                            delivery.next_attempt_at = Some(next);
                            batch.put(keys::webhook_due(next, p, w, d), Vec::new());
                        }
                        None => {
                            ctx.metrics.webhooks_failed.add(1);
                            delivery.status = DeliveryStatus::Failed;
                        }
                    }
                }
            }
        }
    }
    records::put_delivery(&mut batch, p, &delivery)?;
    // The endpoint's record is written only when this outcome changed it.
    let changed = hook.as_ref().filter(|_| hook != hook_before);
    if let Some(h) = changed {
        records::put(&mut batch, p, h)?;
    }
    store.apply(batch)?;
    if changed.is_some() {
        super::endpoints::Endpoints::of(ctx.states)?.forget();
    }
    Ok(())
}

/// Deliveries waiting for an attempt, every project's (for /metrics).
pub fn backlog(store: &dyn crate::store::Store) -> Result<u64> {
    let mut n = 0;
    for kv in store.scan(keys::WEBHOOK_DUE, None, false) {
        kv?;
        n += 1;
    }
    Ok(n)
}
