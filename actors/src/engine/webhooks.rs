//! The event webhooks' door: endpoints, their recent deliveries, and a test event.

pub use crate::webhooks::actions::{NewWebhook, TestOutcome, WebhookPatch};
pub use crate::webhooks::{Delivery, Webhook};

use super::Engine;
use crate::error::Result;
use crate::model::{ProjectId, WebhookId};
use crate::webhooks::actions;

/// `engine.webhooks()`.
pub struct Webhooks<'e>(pub(super) &'e Engine);

impl Webhooks<'_> {
    /// An endpoint (its URL and events checked, within the project's count), with a new
    /// signing secret.
    pub async fn create(&self, p: ProjectId, new: NewWebhook) -> Result<Webhook> {
        actions::create(&self.0.registry, &self.0.webhooks, p, new).await
    }

    /// Every endpoint of the project.
    pub fn list(&self, p: ProjectId) -> Result<Vec<Webhook>> {
        actions::list(&self.0.registry, p)
    }

    /// The endpoint, or 404.
    pub fn get(&self, p: ProjectId, id: WebhookId) -> Result<Webhook> {
        actions::get(&self.0.registry, p, id)
    }

    pub async fn update(
        &self,
        p: ProjectId,
        id: WebhookId,
        patch: WebhookPatch,
    ) -> Result<Webhook> {
        actions::update(&self.0.registry, &self.0.webhooks, p, id, patch).await
    }

    pub async fn delete(&self, p: ProjectId, id: WebhookId) -> Result<()> {
        actions::delete(&self.0.registry, p, id).await
    }

    /// A new signing secret; the old one stops signing at once.
    pub async fn rotate_secret(&self, p: ProjectId, id: WebhookId) -> Result<Webhook> {
        actions::rotate_secret(&self.0.registry, p, id).await
    }

    /// The endpoint's latest `limit` deliveries, newest first.
    pub fn deliveries(&self, p: ProjectId, id: WebhookId, limit: usize) -> Result<Vec<Delivery>> {
        actions::deliveries(&self.0.registry, p, id, limit)
    }

    /// Sends a `webhook.test` event to the endpoint now, and answers what it got.
    pub async fn test(&self, p: ProjectId, id: WebhookId) -> Result<TestOutcome> {
        actions::test(&self.0.registry, &self.0.webhook_client, p, id).await
    }
}
