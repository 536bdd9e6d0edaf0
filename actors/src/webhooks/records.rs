//! The webhooks' records: endpoints (`keys::webhook`), their deliveries
//! (`keys::delivery`), and the queue of deliveries due (`keys::webhook_due`).

use crate::error::Result;
use crate::model::{DeliveryId, ProjectId, WebhookId};
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
