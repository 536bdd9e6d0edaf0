//! The typed requests and views of the events endpoints (handled in
//! `http/events.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::engine::events::Event;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub id: String,
    pub name: String,
    pub contact_id: String,
    pub email: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// API (from /v1/track) or SYSTEM (recorded by the service).
    pub source: &'static str,
    pub created_at: String,
}

impl From<&Event> for EventView {
    fn from(e: &Event) -> Self {
        EventView {
            id: e.id.to_string(),
            name: e.name.clone(),
            contact_id: e.contact_id.to_string(),
            email: e.email.to_string(),
            data: serde_json::Value::Object(e.data.clone()),
            source: e.source.as_str(),
            created_at: e.created_at.to_iso(),
        }
    }
}

paged_list!(EventList { events: EventView });

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventName {
    pub name: String,
    pub count: u64,
    pub last_seen_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventNames {
    pub names: Vec<EventName>,
    pub total: u64,
}
