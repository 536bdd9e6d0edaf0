//! The emails in an SMTP attempt right now. The stored status of such an email is still
//! QUEUED (an attempt is not worth a durable write, and a crash during one only means
//! the email is tried again); readers consult this set to answer SENDING instead.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::model::EmailId;

#[derive(Default)]
pub struct Attempts {
    ids: Mutex<HashSet<EmailId>>,
}

impl Attempts {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<EmailId>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn begin(&self, id: EmailId) {
        self.ids().insert(id);
    }

    /// Called once the attempt's outcome is recorded, so a reader goes from SENDING
    /// straight to the outcome, never back through QUEUED.
    pub fn end(&self, id: EmailId) {
        self.ids().remove(&id);
    }

    pub fn contains(&self, id: EmailId) -> bool {
        self.ids().contains(&id)
    }
}
