//! The messages a ProjectActor answers, one struct each.

use actix::Message;

use crate::domain::dkim::DkimKey;
use crate::domain::{Domain, DomainCheck, DomainName};
use crate::error::Result;
use crate::idempotency::Claim;
use crate::model::{Contact, ContactId, DataMap, DataPatch, DomainId, EmailAddress, SegmentId};
use crate::segment::{Group, Segment, SegmentKind};

pub use super::track::TrackOutcome;

/// Create or update a contact by email.
#[derive(Debug, Message)]
#[rtype(result = "Result<UpsertOutcome>")]
pub struct UpsertContact {
    pub email: EmailAddress,
    /// None keeps the current flag; a new contact then gets `default_subscribed`.
    pub subscribed: Option<bool>,
    pub default_subscribed: bool,
    pub data: DataPatch,
}

#[derive(Debug, Clone)]
pub struct UpsertOutcome {
    pub contact: Contact,
    pub is_new: bool,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<Contact>")]
pub struct PatchContact {
    pub id: ContactId,
    pub subscribed: Option<bool>,
    pub data: DataPatch,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub struct DeleteContact {
    pub id: ContactId,
}

/// Record an event for a contact, creating or updating the contact (POST /v1/track).
#[derive(Debug, Message)]
#[rtype(result = "Result<TrackOutcome>")]
pub struct Track {
    pub email: EmailAddress,
    pub subscribed: Option<bool>,
    /// The plain and `persistent: true` values, merged into the contact.
    pub contact_data: DataPatch,
    pub event: String,
    /// Every value of the call's `data`, unwrapped; kept on the event.
    pub event_data: DataMap,
    pub idempotency: Option<Claim>,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<Segment>")]
pub struct CreateSegment {
    pub name: String,
    pub description: Option<String>,
    pub kind: SegmentKind,
    /// Some exactly when `kind` is DYNAMIC.
    pub filters: Option<Group>,
    pub track_membership: bool,
}

/// Each field, when Some, replaces the current value.
#[derive(Debug, Message)]
#[rtype(result = "Result<Segment>")]
pub struct UpdateSegment {
    pub id: SegmentId,
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub filters: Option<Group>,
    pub track_membership: Option<bool>,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub struct DeleteSegment {
    pub id: SegmentId,
}

/// Add (`add`) or remove contacts of a STATIC segment, by email.
#[derive(Debug, Message)]
#[rtype(result = "Result<MembersOutcome>")]
pub struct ChangeMembers {
    pub id: SegmentId,
    pub emails: Vec<EmailAddress>,
    pub add: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MembersOutcome {
    /// Contacts added (or removed) by this call; ones already in that state are not counted.
    pub changed: u64,
    /// Emails with no contact in the project.
    pub not_found: Vec<String>,
}

/// Stops the actor so that its supervisor restarts it (and it reloads from the store).
/// Used by operators' tooling and by the supervision tests.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Restart;

/// How many times this actor has been (re)started; for supervision tests and metrics.
#[derive(Debug, Message)]
#[rtype(result = "u64")]
pub struct Generation;

/// Stores a new template (already compiled once at the edge).
#[derive(Debug, Message)]
#[rtype(result = "Result<crate::model::Template>")]
pub struct CreateTemplate(pub crate::model::Template);

#[derive(Debug, Message)]
#[rtype(result = "Result<crate::model::Template>")]
pub struct UpdateTemplate {
    pub id: crate::model::TemplateId,
    pub patch: crate::model::template::TemplatePatch,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub struct DeleteTemplate {
    pub id: crate::model::TemplateId,
}

/// Queues a send's rendered emails (see `sending::queue`): written durably before the
/// answer, or handed back to be rendered again when a recipient changed meanwhile.
#[derive(Message)]
#[rtype(result = "Result<crate::project::sending::Queued>")]
pub struct QueueEmails {
    pub spec: crate::project::sending::SendSpec,
    pub rendered: Vec<crate::project::sending::Rendered>,
}

/// One recipient's entry in the answer (also what an idempotent replay answers).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct QueuedEmail {
    pub contact_id: ContactId,
    pub email: EmailAddress,
    /// None when the recipient was skipped.
    pub email_id: Option<crate::model::EmailId>,
    pub skipped: Option<String>,
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

/// Adds a sender domain. The key pair is generated before the message is sent (it
/// takes a fraction of a second of CPU), so the actor only checks and writes.
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub struct CreateDomain {
    pub name: DomainName,
    pub token: String,
    pub key: DkimKey,
}

/// The operator marks a domain verified without DNS (adding it with `0`'s key if the
/// project lacks it).
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub struct TrustDomain(pub CreateDomain);

#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub struct DeleteDomain {
    pub id: DomainId,
}

/// Records the outcome of a DNS check made by the caller.
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub struct ApplyDomainCheck {
    pub id: DomainId,
    pub check: DomainCheck,
}
