//! A project's suppression list (API.md 28): addresses that get no mail of any kind,
//! whatever their contact says. Reports put addresses on it (a hard bounce, soft
//! bounces in a row, a complaint; see `feedback`), a tenant adds and removes its own
//! (`manual`), and every send looks it up before it writes an email.
//!
//! An entry is keyed by the SHA-256 of the address (trimmed, lower case), so deleting
//! the contact can drop the address and keep the entry: the hash still matches the
//! next send to it. This module names only the core, so the email and campaign
//! features can ask it without a circle.

pub mod actions;
mod records;

pub(crate) use records::{forget_address, lookup, suppress};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Why an address is on the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    HardBounce,
    SoftBounce,
    Complaint,
    Manual,
}

impl Reason {
    pub const ALL: [Reason; 4] = [
        Reason::HardBounce,
        Reason::SoftBounce,
        Reason::Complaint,
        Reason::Manual,
    ];
    pub const NAMES: [&'static str; 4] = ["hard_bounce", "soft_bounce", "complaint", "manual"];

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self.byte() as usize]
    }

    pub fn parse(s: &str) -> Option<Reason> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
    }

    /// Its byte in the count keys.
    fn byte(self) -> u8 {
        match self {
            Reason::HardBounce => 0,
            Reason::SoftBounce => 1,
            Reason::Complaint => 2,
            Reason::Manual => 3,
        }
    }
}

/// One entry of the list, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    /// Orders the list (newest first) and is its page cursor.
    pub id: uuid::Uuid,
    /// The address; None once its contact was deleted (the hash stays).
    pub email: Option<String>,
    pub hash: [u8; 32],
    pub reason: Reason,
    /// The email whose report put the address here.
    pub email_id: Option<String>,
    pub created_at: i64,
    /// When a soft-bounce suppression lifts (ms); None: it stays until removed.
    pub expires_at: Option<i64>,
}

impl Suppression {
    pub fn new(email: &str, reason: Reason, now_ms: i64) -> Suppression {
        Suppression {
            id: uuid::Uuid::now_v7(),
            email: Some(email.trim().to_ascii_lowercase()),
            hash: hash(email),
            reason,
            email_id: None,
            created_at: now_ms,
            expires_at: None,
        }
    }

    /// The email whose report put the address here.
    pub fn for_email(mut self, id: Option<String>) -> Self {
        self.email_id = id;
        self
    }

    /// Lifts at `at` (ms).
    pub fn until(mut self, at: Option<i64>) -> Self {
        self.expires_at = at;
        self
    }

    pub fn applies(&self, now_ms: i64) -> bool {
        self.expires_at.is_none_or(|at| at > now_ms)
    }

    pub fn hash_hex(&self) -> String {
        self.hash.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The core's hook on a contact's delete (`project::hooks::ContactDeleted`): its entry,
/// if it has one, keeps only the hash.
pub(crate) fn on_contact_deleted(
    store: &dyn crate::store::Store,
    batch: &mut crate::store::Batch,
    p: crate::model::ProjectId,
    contact: &crate::model::Contact,
) -> crate::error::Result<()> {
    forget_address(batch, store, p, contact.email.as_str())
}

/// The SHA-256 of an address as the list keys it: trimmed and in lower case, so
/// `Ada@Example.com ` and `ada@example.com` are one entry.
pub(crate) fn hash(email: &str) -> [u8; 32] {
    Sha256::digest(email.trim().to_ascii_lowercase().as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_hashes_the_same_in_any_case_and_padding() {
        assert_eq!(hash("Ada@Example.com "), hash("ada@example.com"));
        assert_ne!(hash("ada@example.com"), hash("ada@example.co"));
    }

    #[test]
    fn each_reason_reads_back_from_its_name() {
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
        assert_eq!(Reason::parse("hard-bounce"), None);
    }
}
