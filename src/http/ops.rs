//! Operations endpoints, without auth: /health, /metrics and /openapi.json.

use std::time::Duration;

use actix_web::{web, HttpResponse};

use crate::api::error::ApiError;
use crate::state::AppState;

use crate::api::ops::Health;
#[utoipa::path(get, path = "/health", tag = "Operations", responses((status = 200, body = Health)))]
pub async fn health(state: web::Data<AppState>) -> HttpResponse {
    let projects_owned = match &state.cluster {
        Some(c) => c.leases_held(),
        // Every project is this server's: counted at most once a second.
        None => match state.engine.projects().recent_count(Duration::from_secs(1)) {
            Some(n) => n,
            None => {
                let projects = state.engine.projects().clone();
                super::blocking(move || projects.count()).await.unwrap_or(0)
            }
        },
    };
    HttpResponse::Ok().json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        backend: state.backend,
        node_id: state.node_id.clone(),
        projects_owned,
        live_nodes: state.cluster.as_ref().map_or(1, |c| c.live_count()),
    })
}

#[utoipa::path(get, path = "/metrics", tag = "Operations",
    responses((status = 200, description = "Prometheus text format")))]
pub async fn metrics(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if !state.metrics_enabled {
        return Err(mailroom_actors::Error::NotFound(mailroom_actors::Resource::Route).into());
    }
    let text = super::blocking(move || Ok(state.metrics.render(&state))).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(text))
}

#[utoipa::path(get, path = "/openapi.json", tag = "Operations",
    responses((status = 200, description = "This OpenAPI 3 document")))]
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(super::openapi::document())
}
