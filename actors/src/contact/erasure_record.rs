//! An erasure's durable record (`keys::erasure`) and what an erased record becomes: a
//! leaf, so that the contact delete (which writes the record) and the delivery path
//! (which meets erased emails) use it without importing the erasure itself.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{ContactId, EmailAddress, ProjectId};
use crate::store::{codec, keys, Store};

/// An error text that named the erased recipient.
pub const ERASED_ERROR: &str = "(erased with the contact)";

/// What an erased email's address becomes. Not a deliverable address (no dot in the
/// domain), so nothing parses it back into a recipient or an event.
pub const ERASED: &str = "erased@invalid";

/// The address a stored email went to, typed again for its events: none for an erased
/// one. Every other stored address was an `EmailAddress` when it was written
/// (`Mailbox::new`), so one that does not parse is a damaged record: an error for the
/// caller to report, never an event dropped without a word.
pub fn recipient_of(stored: &str) -> Result<Option<EmailAddress>> {
    if stored == ERASED {
        return Ok(None);
    }
    EmailAddress::parse(stored)
        .map(Some)
        .map_err(|e| Error::storage(format!("a stored recipient address does not parse: {e}")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Campaigns,
    Workflows,
    Emails,
    Events,
    Stats,
    Idempotency,
}

impl Phase {
    pub fn next(self) -> Option<Phase> {
        match self {
            Phase::Campaigns => Some(Phase::Workflows),
            Phase::Workflows => Some(Phase::Emails),
            Phase::Emails => Some(Phase::Events),
            Phase::Events => Some(Phase::Stats),
            Phase::Stats => Some(Phase::Idempotency),
            Phase::Idempotency => None,
        }
    }
}

/// An erasure under way. It holds the address until it ends (the idempotency phase and
/// error texts are searched for it), and is deleted then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Erasure {
    pub email: String,
    pub phase: Phase,
    /// Where the phase goes on: past this key (the phase's own kind of key); empty
    /// from the start.
    #[serde(with = "serde_bytes")]
    pub cursor: Vec<u8>,
}

impl Erasure {
    pub fn new(email: &str) -> Self {
        Erasure {
            email: email.to_owned(),
            phase: Phase::Campaigns,
            cursor: Vec::new(),
        }
    }

    pub fn after(&self) -> Option<&[u8]> {
        (!self.cursor.is_empty()).then_some(self.cursor.as_slice())
    }
}

pub fn load(store: &dyn Store, p: ProjectId, c: ContactId) -> Result<Option<Erasure>> {
    store
        .get(&keys::erasure(p, c))?
        .map(|b| codec::decode(&b))
        .transpose()
}

/// One phase's slice: the records it handled, and where it stopped (None: finished).
pub struct Step {
    pub used: usize,
    pub cursor: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_erased_recipient_has_no_address_and_a_damaged_one_is_an_error() {
        assert_eq!(recipient_of(ERASED).unwrap(), None);
        assert_eq!(
            recipient_of("ada@example.com").unwrap(),
            Some(EmailAddress::parse("ada@example.com").unwrap())
        );
        assert!(recipient_of("not an address").is_err());
    }
}
