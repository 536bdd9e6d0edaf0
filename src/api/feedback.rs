//! The typed requests and views of the feedback endpoints (handled in
//! `http/feedback.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use serde::Serialize;
use utoipa::ToSchema;

/// What a callback did with the reports it carried.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct CallbackResult {
    /// Bounces and complaints in the payload.
    pub reports: u32,
    pub applied: u32,
    /// Applied before (the provider sent it again).
    pub duplicates: u32,
    /// Naming no email and no contact this server knows.
    pub unmatched: u32,
    /// An SNS subscription confirmed (`POST /feedback/ses` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribed: Option<bool>,
}
