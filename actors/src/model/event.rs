//! An event recorded for a contact: custom ones from /v1/track, and system ones
//! (`contact.subscribed`, `email.sent`, ...) recorded by the service itself.

use serde::{Deserialize, Serialize};

use super::{ContactId, DataMap, EmailAddress, EventId, Timestamp};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventSource {
    Api,
    System,
}

impl EventSource {
    pub fn as_str(self) -> &'static str {
        match self {
            EventSource::Api => "API",
            EventSource::System => "SYSTEM",
        }
    }
}

/// What is known of one event name for one contact (or for a whole project): kept
/// up to date as events are appended, so that filters never count events by scanning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventStats {
    pub count: u64,
    pub first_at: i64,
    pub last_at: i64,
}

impl EventStats {
    pub fn add(&mut self, at: i64) {
        if self.count == 0 {
            self.first_at = at;
            self.last_at = at;
        } else {
            self.first_at = self.first_at.min(at);
            self.last_at = self.last_at.max(at);
        }
        self.count += 1;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: EventId,
    pub name: String,
    pub contact_id: ContactId,
    pub email: EmailAddress,
    pub data: DataMap,
    pub source: EventSource,
    pub created_at: Timestamp,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    id: EventId,
    name: String,
    contact_id: ContactId,
    email: String,
    data: String,
    source: EventSource,
    created_at: i64,
}

impl Event {
    pub fn system(name: &str, contact_id: ContactId, email: &EmailAddress, at: Timestamp) -> Self {
        Event {
            id: EventId::at(at),
            name: name.to_owned(),
            contact_id,
            email: email.clone(),
            data: DataMap::new(),
            source: EventSource::System,
            created_at: at,
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::codec::encode(&Stored {
            id: self.id,
            name: self.name.clone(),
            contact_id: self.contact_id,
            email: self.email.as_str().to_owned(),
            data: serde_json::to_string(&self.data).map_err(|e| Error::Internal(e.to_string()))?,
            source: self.source,
            created_at: self.created_at.millis(),
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::codec::decode(bytes)?;
        Ok(Event {
            id: s.id,
            name: s.name,
            contact_id: s.contact_id,
            email: EmailAddress::parse(&s.email)
                .map_err(|_| Error::storage(format!("stored event {} has a bad email", s.id)))?,
            data: serde_json::from_str(&s.data)
                .map_err(|e| Error::storage_caused("stored event data", e))?,
            source: s.source,
            created_at: s.created_at.into(),
        })
    }
}

/// Whether an event name belongs to the service's own events.
pub fn is_reserved_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("email.")
        || n == "contact.subscribed"
        || n == "contact.unsubscribed"
        || (n.starts_with("segment.") && (n.ends_with(".entry") || n.ends_with(".exit")))
}

#[cfg(test)]
mod reserved_tests {
    use super::is_reserved_name;

    #[test]
    fn reserved_names_are_the_services_own() {
        for n in [
            "email.sent",
            "Email.open",
            "contact.subscribed",
            "contact.unsubscribed",
            "segment.pro.entry",
            "segment.a.b.exit",
        ] {
            assert!(is_reserved_name(n), "{n}");
        }
        for n in [
            "signup",
            "emailed",
            "contact.created",
            "segment.pro",
            "purchase.exit",
        ] {
            assert!(!is_reserved_name(n), "{n}");
        }
    }
}
