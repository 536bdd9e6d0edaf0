//! A contact: an email address, a marketing subscription flag and free-form data.

use serde::{Deserialize, Serialize};

use super::{ContactId, DataMap, EmailAddress, Timestamp};
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct Contact {
    pub id: ContactId,
    pub email: EmailAddress,
    pub subscribed: bool,
    pub data: DataMap,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The stored form. bincode cannot read free-form JSON back (it has no self-describing
/// values), so `data` is kept as JSON text inside the bincode record.
#[derive(Serialize, Deserialize)]
struct Stored {
    id: ContactId,
    email: String,
    subscribed: bool,
    data: String,
    created_at: i64,
    updated_at: i64,
}

/// A stored contact read without copying or parsing: the strings borrow from the
/// stored bytes and `data` stays JSON text. Segment scans use it so that a million
/// contacts cost a million cheap decodes, not a million JSON parses. It must list
/// the fields of `Stored` in the same order.
#[derive(Deserialize)]
pub struct ContactRef<'a> {
    pub id: ContactId,
    pub email: &'a str,
    pub subscribed: bool,
    pub data: &'a str,
    pub created_at: i64,
    pub updated_at: i64,
}

impl<'a> ContactRef<'a> {
    pub fn decode(bytes: &'a [u8]) -> Result<Self> {
        crate::codec::decode_borrowed(bytes)
    }
}

impl Contact {
    pub fn encode(&self) -> Result<Vec<u8>> {
        let stored = Stored {
            id: self.id,
            email: self.email.as_str().to_owned(),
            subscribed: self.subscribed,
            data: serde_json::to_string(&self.data).map_err(|e| Error::Internal(e.to_string()))?,
            created_at: self.created_at.millis(),
            updated_at: self.updated_at.millis(),
        };
        crate::codec::encode(&stored)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::codec::decode(bytes)?;
        Self::from_stored(s)
    }

    fn from_stored(s: Stored) -> Result<Self> {
        Ok(Contact {
            id: s.id,
            email: EmailAddress::parse(&s.email)
                .map_err(|_| Error::storage(format!("stored contact {} has a bad email", s.id)))?,
            subscribed: s.subscribed,
            data: serde_json::from_str(&s.data)
                .map_err(|e| Error::storage_caused("stored contact data", e))?,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_light_form_reads_what_the_full_form_wrote() {
        let mut data = DataMap::new();
        data.insert("plan".into(), serde_json::json!("pro"));
        let c = Contact {
            id: ContactId::new(),
            email: EmailAddress::parse("ada@example.com").unwrap(),
            subscribed: true,
            data,
            created_at: 5.into(),
            updated_at: 7.into(),
        };
        let bytes = c.encode().unwrap();
        let r = ContactRef::decode(&bytes).unwrap();
        assert_eq!(
            (r.id, r.email, r.subscribed),
            (c.id, "ada@example.com", true)
        );
        assert_eq!(
            (r.data, r.created_at, r.updated_at),
            ("{\"plan\":\"pro\"}", 5, 7)
        );
    }
}
