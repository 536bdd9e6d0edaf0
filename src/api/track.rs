//! The typed requests and views of the track endpoints (handled in
//! `http/track.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::model::{DataMap, EmailAddress};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::wire::EventName;

#[derive(Debug, Serialize, ToSchema)]
pub struct TrackData {
    /// The contact's id.
    pub contact: String,
    /// The event's id.
    pub event: String,
    pub timestamp: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TrackResponse {
    pub success: bool,
    pub data: TrackData,
}

/// Request body of POST /v1/track.
#[derive(Deserialize, ToSchema)]
pub struct TrackRequest {
    pub email: EmailAddress,
    /// The event name; `email.*`, `contact.subscribed`, `contact.unsubscribed` and
    /// `segment.*.entry|exit` are reserved (422 `reserved_event`).
    pub event: EventName,
    /// Sets the subscription flag; a new contact is subscribed by default. With a public
    /// key it applies only to a contact that this call creates.
    pub subscribed: Option<bool>,
    /// Values are merged into the contact; a value `{value, persistent: false}` is kept
    /// on the event only, and `{value, persistent: true}` is stored as its plain value.
    /// `null` deletes the key, with the secret key only.
    #[schema(value_type = Option<Object>)]
    pub data: Option<DataMap>,
}
