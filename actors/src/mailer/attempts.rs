//! The emails the dispatcher holds right now, and which of them are in an SMTP attempt.
//! The stored status of such an email is still QUEUED (an attempt is not worth a durable
//! write, and a crash during one only means the email is tried again); readers consult
//! this map to answer SENDING instead.
//!
//! A campaign's cancel asks here before it drops an email: one already in an attempt
//! goes on, and one merely picked is marked so that its attempt never starts. Both
//! sides decide under one lock, so an email is either sent or dropped, never both.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::EmailId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Picked,
    Attempting,
    Cancelled,
}

#[derive(Default)]
pub struct Attempts {
    ids: Mutex<HashMap<EmailId, State>>,
}

impl Attempts {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<EmailId, State>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The dispatcher took the email out of the outbox.
    pub fn pick(&self, id: EmailId) {
        self.ids().insert(id, State::Picked);
    }

    /// The SMTP attempt starts, unless the email was cancelled since it was picked.
    pub fn begin(&self, id: EmailId) -> bool {
        let mut ids = self.ids();
        match ids.get(&id) {
            Some(State::Cancelled) => false,
            _ => {
                ids.insert(id, State::Attempting);
                true
            }
        }
    }

    /// Whether an email may be dropped: yes unless its attempt has started (then it
    /// is marked, should the dispatcher hold it, so that no attempt starts).
    pub fn cancel(&self, id: EmailId) -> bool {
        let mut ids = self.ids();
        match ids.get(&id) {
            Some(State::Attempting) => false,
            Some(_) => {
                ids.insert(id, State::Cancelled);
                true
            }
            None => true,
        }
    }

    /// Called once the attempt's outcome is recorded, so a reader goes from SENDING
    /// straight to the outcome, never back through QUEUED.
    pub fn end(&self, id: EmailId) {
        self.ids().remove(&id);
    }

    /// Whether the email is in an SMTP attempt.
    pub fn contains(&self, id: EmailId) -> bool {
        self.ids().get(&id) == Some(&State::Attempting)
    }
}
