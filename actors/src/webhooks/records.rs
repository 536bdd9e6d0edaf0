//! The webhooks' records: endpoints (`keys::webhook`), how far each has been delivered
//! (`keys::webhook_cursor`), their deliveries (`keys::delivery`, written with a first
//! attempt's outcome), and the queue of retries due (`keys::webhook_due`).

use crate::contact::erasure_record::Step;
use crate::error::Result;
use crate::model::{ContactId, DeliveryId, ProjectId, WebhookId};
use crate::store::{codec, keys, Batch, Store};

use super::model::{Delivery, Webhook};

pub fn load(store: &dyn Store, p: ProjectId, w: WebhookId) -> Result<Option<Webhook>> {
    store
        .get(&keys::webhook(p, w))?
        .map(|b| codec::decode(&b))
        .transpose()
}

/// Every endpoint of the project, oldest first.
pub fn all(store: &dyn Store, p: ProjectId) -> Result<Vec<Webhook>> {
    store
        .scan(&keys::webhooks(p), None, false)
        .map(|kv| codec::decode(&kv?.1))
        .collect()
}

pub fn put(batch: &mut Batch, p: ProjectId, w: &Webhook) -> Result<()> {
    batch.put(keys::webhook(p, w.id), codec::encode(w)?);
    Ok(())
}

/// The event id from which the endpoint's events may still lack their delivery: the
/// events before it all have one (or are not for it).
pub fn cursor(store: &dyn Store, p: ProjectId, w: WebhookId) -> Result<Option<[u8; 16]>> {
    Ok(store
        .get(&keys::webhook_cursor(p, w))?
        .and_then(|b| b.as_slice().try_into().ok()))
}

pub fn put_cursor(batch: &mut Batch, p: ProjectId, w: WebhookId, from: [u8; 16]) {
    batch.put(keys::webhook_cursor(p, w), from.to_vec());
}

pub fn load_delivery(
    store: &dyn Store,
    p: ProjectId,
    w: WebhookId,
    d: DeliveryId,
) -> Result<Option<Delivery>> {
    store
        .get(&keys::delivery(p, w, d))?
        .map(|b| codec::decode(&b))
        .transpose()
}

pub fn put_delivery(batch: &mut Batch, p: ProjectId, d: &Delivery) -> Result<()> {
    batch.put(keys::delivery(p, d.webhook, d.id), codec::encode(d)?);
    Ok(())
}

/// The endpoint's latest deliveries, newest first, at most `limit`.
pub fn recent_deliveries(
    store: &dyn Store,
    p: ProjectId,
    w: WebhookId,
    limit: usize,
) -> Result<Vec<Delivery>> {
    store
        .scan(&keys::deliveries(p, w), None, true)
        .take(limit)
        .map(|kv| codec::decode(&kv?.1))
        .collect()
}

/// Erasure of contact `c` (`email`): up to `left` of the project's deliveries past
/// `after`; each that carries the contact loses its payload, and one still waiting is
/// called off (out of the queue, CANCELLED), so no endpoint gets the address later.
pub fn erase_contact(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    email: &str,
    after: Option<&[u8]>,
    left: usize,
) -> Result<Step> {
    let prefix = keys::in_project_tag(p, b"/whd/");
    let id = c.to_string();
    let mut used = 0;
    let mut last = None;
    for kv in store.scan(&prefix, after, false) {
        let (k, v) = kv?;
        if used == left {
            return Ok(Step {
                used,
                cursor: last.or_else(|| after.map(<[u8]>::to_vec)),
            });
        }
        used += 1;
        let mut d: Delivery = codec::decode(&v)?;
        if d.payload.contains(&id) || (!email.is_empty() && d.payload.contains(email)) {
            if let Some(at) = d.next_attempt_at.take() {
                batch.delete(keys::webhook_due(at, p, d.webhook, d.id));
                d.status = super::model::DeliveryStatus::Cancelled;
            }
            d.payload = String::new();
            batch.put(k.clone(), codec::encode(&d)?);
        }
        last = Some(k);
    }
    Ok(Step { used, cursor: None })
}

/// Retention: deletes the deliveries made before `before` that are over (delivered,
/// failed, cancelled), walking at most `max` of the project's deliveries after `after`;
/// how many went, and where the next slice starts.
pub fn purge(
    store: &dyn Store,
    p: ProjectId,
    before: i64,
    after: Option<&[u8]>,
    max: usize,
) -> Result<(usize, Option<Vec<u8>>)> {
    let mut batch = Batch::new();
    let (mut removed, mut next) = (0, None);
    for (walked, kv) in store
        .scan(&keys::in_project_tag(p, b"/whd/"), after, false)
        .enumerate()
    {
        let (k, v) = kv?;
        if walked >= max {
            next = Some(k);
            break;
        }
        let Ok(d) = codec::decode::<Delivery>(&v) else {
            continue;
        };
        if d.status != super::model::DeliveryStatus::Pending && d.created_at < before {
            batch.delete(k);
            removed += 1;
        }
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok((removed, next))
}
