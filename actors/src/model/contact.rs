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
        crate::store::codec::encode(&stored)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::store::codec::decode(bytes)?;
        Ok(Contact {
            id: s.id,
            email: EmailAddress::parse(&s.email)
                .map_err(|_| Error::Storage(format!("stored contact {} has a bad email", s.id)))?,
            subscribed: s.subscribed,
            data: serde_json::from_str(&s.data).map_err(|e| Error::Storage(e.to_string()))?,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        })
    }
}
