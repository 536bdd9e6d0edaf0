//! The messages a ProjectActor answers, one struct each.

use actix::Message;

use crate::domain::dkim::DkimKey;
use crate::domain::{Domain, DomainCheck, DomainName};
use crate::error::Result;
use crate::model::{Contact, ContactId, DataPatch, DomainId, EmailAddress};

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
