//! An erasure's durable record (`keys::erasure`) and what an erased record becomes: a
//! leaf, so that the contact delete (which writes the record) and the delivery path
//! (which meets erased emails) use it without importing the erasure itself.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{ContactId, ProjectId};
use crate::store::{codec, keys, Store};

/// An error text that named the erased recipient.
pub const ERASED_ERROR: &str = "(erased with the contact)";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Campaigns,
    Workflows,
    Emails,
    Events,
    Stats,
    Idempotency,
    /// The rejected rows of the project's imports (a row refused for a limit keeps its
    /// address). Last, and so new records' phases keep their stored numbers.
    Imports,
    /// Event webhook deliveries that carry the contact: those still waiting are called
    /// off, and every one loses its payload.
    Webhooks,
}

impl Phase {
    pub fn next(self) -> Option<Phase> {
        match self {
            Phase::Campaigns => Some(Phase::Workflows),
            Phase::Workflows => Some(Phase::Emails),
            Phase::Emails => Some(Phase::Events),
            Phase::Events => Some(Phase::Stats),
            Phase::Stats => Some(Phase::Idempotency),
            Phase::Idempotency => Some(Phase::Imports),
            Phase::Imports => Some(Phase::Webhooks),
            Phase::Webhooks => None,
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

/// Walks the keys under `prefix` past the erasure's cursor, at most `left` of them,
/// calling `each` with every key; the cursor moves past the last one seen.
pub fn walk(
    store: &dyn Store,
    prefix: &[u8],
    erasure: &Erasure,
    left: usize,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<Step> {
    let mut used = 0;
    let mut last = None;
    for kv in store.scan(prefix, erasure.after(), false) {
        let (k, v) = kv?;
        if used == left {
            return Ok(Step {
                used,
                cursor: Some(last.unwrap_or_else(|| erasure.cursor.clone())),
            });
        }
        each(&k, &v)?;
        used += 1;
        last = Some(k);
    }
    Ok(Step { used, cursor: None })
}

/// Whether `needle` (not empty) occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}
