//! `GET /stats` (API.md 27): the key's project at a glance, with its rolling bounce and
//! complaint rates. A bare object, as the contact endpoints answer.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::error::ApiError;
use super::AppState;

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

#[utoipa::path(get, path = "/stats", tag = "Stats",
    responses((status = 200, body = ProjectStatsView)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let s = state.engine.suppressions().stats(p.id).await?;
    Ok(HttpResponse::Ok().json(ProjectStatsView {
        contacts: s.contacts,
        subscribed: s.subscribed,
        bounce_rate: s.bounce_rate,
        complaint_rate: s.complaint_rate,
        suppressed: s.suppressed,
    }))
}
