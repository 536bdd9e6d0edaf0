//! The typed requests and views of the contacts endpoints (handled in
//! `http/contacts.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::model::{Contact, DataMap, EmailAddress};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactView {
    pub id: String,
    pub email: String,
    pub subscribed: bool,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub created_at: String,
    pub updated_at: String,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<UpsertMeta>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsertMeta {
    pub is_new: bool,
    pub is_update: bool,
}

impl From<&Contact> for ContactView {
    fn from(c: &Contact) -> Self {
        ContactView {
            id: c.id.to_string(),
            email: c.email.to_string(),
            subscribed: c.subscribed,
            data: serde_json::Value::Object(c.data.clone()),
            created_at: c.created_at.to_iso(),
            updated_at: c.updated_at.to_iso(),
            meta: None,
        }
    }
}

paged_list!(ContactList {
    contacts: ContactView
});

/// Request body of POST /contacts.
#[derive(Deserialize, ToSchema)]
pub struct UpsertContactRequest {
    /// Trimmed and lowercased; the upsert key.
    pub email: EmailAddress,
    /// Default true for a new contact; unchanged on an update when omitted.
    pub subscribed: Option<bool>,
    /// Merged shallowly; a key set to null is removed.
    #[schema(value_type = Option<Object>)]
    pub data: Option<DataMap>,
}

/// Request body of PATCH /contacts/{id}.
#[derive(Deserialize, ToSchema)]
pub struct PatchContactRequest {
    pub subscribed: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub data: Option<DataMap>,
}

/// A delete whose erasure goes on in the background.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErasureQueued {
    pub id: String,
    /// Always `"queued"`.
    pub erasure: String,
}
