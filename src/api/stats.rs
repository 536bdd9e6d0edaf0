//! The typed requests and views of the stats endpoints (handled in
//! `http/stats.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectStatsView {
    pub contacts: u64,
    pub subscribed: u64,
    /// Bounced of the last 1,000 to 2,000 emails the relay answered (0 to 1).
    pub bounce_rate: f64,
    /// Complaints of the same emails (0 to 1).
    pub complaint_rate: f64,
    /// Addresses on the suppression list.
    pub suppressed: u64,
}
