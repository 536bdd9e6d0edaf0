//! The emails' door: `/v1/send`, an email as answered, and the opens and clicks its
//! links report.

pub use crate::email::actions::SendRequest;
pub use crate::email::engagement::Hit;
pub use crate::email::sending::{QueuedEmail, Receipt};
pub use crate::model::{Engagement, OutboundEmail};

use super::Engine;
use crate::email::{actions as send, engagement, sending};
use crate::error::{Error, Resource, Result};
use crate::idempotency::Claim;
use crate::model::{EmailId, EmailStatus, ProjectId};

/// `engine.emails()`.
pub struct Emails<'e>(pub(super) &'e Engine);

/// An email as `GET /emails/{id}` answers it.
pub struct EmailRecord {
    pub email: OutboundEmail,
    /// QUEUED while it waits, SENDING while the dispatcher has it out.
    pub status: EmailStatus,
    /// Retention took its subject and body.
    pub content_removed: bool,
    pub engagement: Option<Engagement>,
}

impl Emails<'_> {
    /// Renders and queues `req`'s emails, or answers again what its idempotency key
    /// answered before.
    pub async fn send(&self, p: ProjectId, req: SendRequest) -> Result<Receipt> {
        send::send_request(&self.0.registry, &self.0.templates, p, req).await
    }

    /// What an earlier send with `claim`'s key answered, if there was one (a point read:
    /// no template is loaded).
    pub fn replay(&self, p: ProjectId, claim: Option<&Claim>) -> Result<Option<Receipt>> {
        send::replay(&self.0.registry, p, claim)
    }

    /// The email, or 404.
    pub fn get(&self, p: ProjectId, id: EmailId) -> Result<EmailRecord> {
        let store = &*self.0.store;
        let email = sending::load_email(store, p, id)?.ok_or(Error::NotFound(Resource::Email))?;
        // The stored status stays QUEUED during an attempt; the dispatcher knows better.
        let status =
            if email.status == EmailStatus::Queued && self.0.registry.attempts().contains(id) {
                EmailStatus::Sending
            } else {
                email.status
            };
        Ok(EmailRecord {
            status,
            content_removed: crate::email::retention::content_removed(&email),
            engagement: engagement::engagement(store, p, id)?,
            email,
        })
    }

    /// An open or a click of one of the email's links.
    pub async fn record_hit(
        &self,
        p: ProjectId,
        email: EmailId,
        hit: Hit,
        url: Option<String>,
    ) -> Result<()> {
        engagement::record(&self.0.registry, p, email, hit, url).await
    }

    /// How many of the project's emails wait in the outbox.
    pub async fn outbox_depth(&self, p: ProjectId) -> Result<u64> {
        let store = self.0.store.clone();
        super::off_thread(move || crate::mailer::outbox::depth_of(&*store, p)).await
    }
}
