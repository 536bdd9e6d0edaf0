//! The messages a ProjectActor answers, one struct each.

use actix::Message;

use crate::domain::dkim::DkimKey;
use crate::domain::{Domain, DomainCheck, DomainName};
use crate::error::Result;
use crate::model::DomainId;

// Each feature owns its messages; they are re-exported here so that callers can name
// every message of the project actor from one place.
pub use crate::contact::records::{PatchContact, UpsertContact, UpsertOutcome};
pub use crate::email::sending::{DeliveryOutcome, QueueEmails, QueuedEmail, RecordDelivery};
pub use crate::event::track::{Track, TrackOutcome};
pub use crate::segment::records::{
    ChangeMembers, CreateSegment, DeleteSegment, MembersOutcome, UpdateSegment,
};
pub use crate::template::records::{CreateTemplate, DeleteTemplate, UpdateTemplate};

/// Stops the actor so that its supervisor restarts it (and it reloads from the store).
/// Used by operators' tooling and by the supervision tests.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Restart;

/// How many times this actor has been (re)started; for supervision tests and metrics.
#[derive(Debug, Message)]
#[rtype(result = "u64")]
pub struct Generation;

/// Adds a sender domain. The key pair is generated before the message is sent (it
/// takes a fraction of a second of CPU), so the actor only checks and writes.
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub struct CreateDomain {
    pub name: DomainName,
    pub token: String,
    pub key: DkimKey,
}

impl CreateDomain {
    /// A new domain with its own DKIM key pair and ownership token. RSA key generation
    /// takes a fraction of a second of CPU: call it on a blocking thread.
    pub fn generate(name: DomainName) -> Result<Self> {
        Ok(CreateDomain {
            name,
            token: crate::domain::dkim::ownership_token(),
            key: crate::domain::dkim::generate()?,
        })
    }
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
