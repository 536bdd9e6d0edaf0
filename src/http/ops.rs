//! Operations endpoints, without auth: /health, /metrics and /openapi.json.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::AppState;

#[derive(Serialize, ToSchema)]
pub struct Health {
    status: &'static str,
    version: &'static str,
}

#[utoipa::path(get, path = "/health", tag = "Operations", responses((status = 200, body = Health)))]
pub async fn health() -> HttpResponse {
    HttpResponse::Ok().json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
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
