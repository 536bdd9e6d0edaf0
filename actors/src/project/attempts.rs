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

    /// The dispatcher takes the email out of the outbox, unless a cancel is dropping it.
    pub fn pick(&self, id: EmailId) -> bool {
        let mut ids = self.ids();
        match ids.get(&id) {
            Some(State::Cancelled) => false,
            _ => {
                ids.insert(id, State::Picked);
                true
            }
        }
    }

    /// The SMTP attempt starts, unless the email was cancelled since it was picked
    /// (marked, or its mark already forgotten because the cancel is durable).
    pub fn begin(&self, id: EmailId) -> bool {
        let mut ids = self.ids();
        match ids.get(&id) {
            Some(State::Picked) => {
                ids.insert(id, State::Attempting);
                true
            }
            _ => false,
        }
    }

    /// Whether an email may be dropped: yes unless its attempt has started. A dropped
    /// one is marked until the cancel's write is durable (`forget`): a dispatcher that
    /// holds it starts no attempt, and one that reads its outbox entry before the
    /// write lands does not pick it.
    pub fn cancel(&self, id: EmailId) -> bool {
        let mut ids = self.ids();
        match ids.get(&id) {
            Some(State::Attempting) => false,
            _ => {
                ids.insert(id, State::Cancelled);
                true
            }
        }
    }

    /// Drops the marks of cancelled emails (their outbox entries are gone for good).
    pub fn forget(&self, dropped: &[EmailId]) {
        let mut ids = self.ids();
        for id in dropped {
            if ids.get(id) == Some(&State::Cancelled) {
                ids.remove(id);
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_email_is_neither_picked_nor_begun_and_one_in_an_attempt_is_not_cancelled() {
        let a = Attempts::default();
        let (before_pick, picked, attempting) = (EmailId::new(), EmailId::new(), EmailId::new());
        assert!(a.cancel(before_pick));
        assert!(!a.pick(before_pick), "a cancel in progress keeps it out");
        assert!(a.pick(picked) && a.pick(attempting));
        assert!(a.begin(attempting));
        assert!(a.cancel(picked));
        assert!(!a.cancel(attempting), "its attempt goes on");
        a.forget(&[before_pick, picked]);
        assert!(
            !a.begin(picked),
            "its mark forgotten, it still never starts"
        );
        assert!(a.contains(attempting));
    }
}
