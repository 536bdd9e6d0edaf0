//! `GET /stats` (API.md 27): the key's project at a glance, with its rolling bounce and
//! complaint rates. A bare object, as the contact endpoints answer.

use actix_web::{web, HttpResponse};

use super::auth::SecretKey;
use crate::api::error::ApiError;
use crate::state::AppState;

use crate::api::stats::ProjectStatsView;
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
