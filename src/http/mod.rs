//! The HTTP edge: each handler parses its request, calls the engine through its door and
//! maps the answer. The routes are `configure`'s; the request and view types they speak
//! are `crate::api`'s, which the dashboard shares. Every module here is private, so no
//! page or other part of the binary can call a handler: the compiler keeps them out.

mod access;
mod admin;
mod auth;
mod campaigns;
mod contacts;
mod contacts_bulk;
mod domains;
mod events;
mod feedback;
mod forward;
mod idempotency;
mod links;
mod metrics;
mod openapi;
mod ops;
mod rate_limit;
mod segments;
mod send;
mod stats;
mod suppressions;
mod templates;
mod track;
mod verify;
mod webhooks;
mod workflows;

// The edge's state (`crate::state`) holds these; nothing else of `http` is reachable.
pub use feedback::Callbacks;
pub use forward::{client as forward_client, ForwardClient, Forwarded};
pub use links::HitLimit;
pub use metrics::Metrics;
pub use rate_limit::ProjectRateLimit;

use actix_web::middleware::{from_fn, Condition};
use actix_web::web::{self, ServiceConfig};
use mailroom_actors::{Error, Resource};

use crate::api::error::ApiError;
use crate::api::request_id;
use crate::state::AppState;

/// Runs a blocking store operation (a scan) off the async worker thread.
pub async fn blocking<T, F>(f: F) -> Result<T, ApiError>
where
    F: FnOnce() -> Result<T, Error> + Send + 'static,
    T: Send + 'static,
{
    web::block(f)
        .await
        .map_err(|e| ApiError::Engine(Error::Internal(format!("blocking task: {e}"))))?
        .map_err(ApiError::from)
}

async fn not_found() -> Result<actix_web::HttpResponse, ApiError> {
    Err(Error::NotFound(Resource::Route).into())
}

/// 405 in the standard error body, with the `Allow` header RFC 9110 asks for (the
/// methods the OpenAPI document gives the path).
async fn method_not_allowed(req: actix_web::HttpRequest) -> actix_web::HttpResponse {
    let mut res = actix_web::ResponseError::error_response(&ApiError::MethodNotAllowed);
    let allowed: Vec<String> = req
        .match_pattern()
        .and_then(|p| openapi::document()["paths"].get(&p).cloned())
        .and_then(|item| {
            item.as_object().map(|o| {
                o.keys()
                    .filter(|m| ["get", "post", "put", "patch", "delete"].contains(&m.as_str()))
                    .map(|m| m.to_uppercase())
                    .collect()
            })
        })
        .unwrap_or_default();
    if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&allowed.join(", ")) {
        if !allowed.is_empty() {
            res.headers_mut()
                .insert(actix_web::http::header::ALLOW, value);
        }
    }
    res
}

/// A resource whose other methods answer 405 in the standard error body.
fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

pub fn configure(cfg: &mut ServiceConfig, state: web::Data<AppState>) {
    let access_log = state.access_log;
    let dashboard = state.dashboard.enabled;
    cfg.app_data(state).service(
        web::scope("")
            // Innermost: a forwarded request is still counted, limited and logged here.
            .wrap(from_fn(forward::middleware))
            .wrap(from_fn(metrics::middleware))
            .wrap(from_fn(rate_limit::headers))
            .wrap(from_fn(request_id::middleware))
            // Outside the request id, so that its line carries the id the response has.
            .wrap(Condition::new(access_log, from_fn(access::middleware)))
            .service(resource("/health").route(web::get().to(ops::health)))
            .service(resource("/metrics").route(web::get().to(ops::metrics)))
            .service(resource("/openapi.json").route(web::get().to(ops::openapi)))
            .service(
                resource("/contacts")
                    .route(web::get().to(contacts::list))
                    .route(web::post().to(contacts::upsert)),
            )
            .service(resource("/contacts/import").route(web::post().to(contacts_bulk::import)))
            .service(
                resource("/contacts/imports/{id}").route(web::get().to(contacts_bulk::get_import)),
            )
            .service(resource("/contacts/export").route(web::get().to(contacts_bulk::export)))
            .service(
                resource("/contacts/{id}")
                    .route(web::get().to(contacts::get))
                    .route(web::patch().to(contacts::patch))
                    .route(web::delete().to(contacts::delete)),
            )
            .service(resource("/v1/track").route(web::post().to(track::track)))
            .service(resource("/events").route(web::get().to(events::list)))
            .service(resource("/events/names").route(web::get().to(events::names)))
            .service(resource("/events/{id}").route(web::get().to(events::get)))
            .service(
                resource("/segments")
                    .route(web::get().to(segments::list))
                    .route(web::post().to(segments::create)),
            )
            .service(
                resource("/segments/{id}")
                    .route(web::get().to(segments::get))
                    .route(web::patch().to(segments::update))
                    .route(web::delete().to(segments::delete)),
            )
            .service(resource("/segments/{id}/contacts").route(web::get().to(segments::contacts)))
            .service(
                resource("/segments/{id}/members")
                    .route(web::post().to(segments::add_members))
                    .route(web::delete().to(segments::remove_members)),
            )
            .service(
                resource("/templates")
                    .route(web::get().to(templates::list))
                    .route(web::post().to(templates::create)),
            )
            .service(
                resource("/templates/{id}")
                    .route(web::get().to(templates::get))
                    .route(web::patch().to(templates::update))
                    .route(web::delete().to(templates::delete)),
            )
            .service(resource("/v1/send").route(web::post().to(send::send)))
            .service(resource("/emails/{id}").route(web::get().to(send::get_email)))
            .service(
                resource("/domains")
                    .route(web::get().to(domains::list))
                    .route(web::post().to(domains::create)),
            )
            .service(
                resource("/domains/{id}")
                    .route(web::get().to(domains::get))
                    .route(web::delete().to(domains::delete)),
            )
            .service(resource("/domains/{id}/verify").route(web::post().to(domains::verify)))
            .service(resource("/v1/verify").route(web::post().to(verify::verify)))
            .service(
                resource("/webhooks")
                    .route(web::get().to(webhooks::list))
                    .route(web::post().to(webhooks::create)),
            )
            .service(
                resource("/webhooks/{id}")
                    .route(web::get().to(webhooks::get))
                    .route(web::patch().to(webhooks::update))
                    .route(web::delete().to(webhooks::delete)),
            )
            .service(
                resource("/webhooks/{id}/rotate-secret")
                    .route(web::post().to(webhooks::rotate_secret)),
            )
            .service(
                resource("/webhooks/{id}/deliveries").route(web::get().to(webhooks::deliveries)),
            )
            .service(resource("/webhooks/{id}/test").route(web::post().to(webhooks::test)))
            .service(resource("/stats").route(web::get().to(stats::get)))
            .service(resource("/feedback/postmark").route(web::post().to(feedback::postmark)))
            .service(resource("/feedback/sendgrid").route(web::post().to(feedback::sendgrid)))
            .service(resource("/feedback/mailgun").route(web::post().to(feedback::mailgun)))
            .service(resource("/feedback/ses").route(web::post().to(feedback::ses)))
            .service(
                resource("/suppressions")
                    .route(web::get().to(suppressions::list))
                    .route(web::post().to(suppressions::add)),
            )
            .service(resource("/suppressions/import").route(web::post().to(suppressions::import)))
            .service(
                resource("/suppressions/{email}").route(web::delete().to(suppressions::remove)),
            )
            .service(
                resource("/campaigns")
                    .route(web::get().to(campaigns::list))
                    .route(web::post().to(campaigns::create)),
            )
            .service(
                resource("/campaigns/{id}")
                    .route(web::get().to(campaigns::get))
                    .route(web::patch().to(campaigns::update))
                    .route(web::delete().to(campaigns::delete)),
            )
            .service(resource("/campaigns/{id}/send").route(web::post().to(campaigns::send)))
            .service(resource("/campaigns/{id}/cancel").route(web::post().to(campaigns::cancel)))
            .service(resource("/campaigns/{id}/resume").route(web::post().to(campaigns::resume)))
            .service(resource("/campaigns/{id}/test").route(web::post().to(campaigns::test)))
            .service(resource("/campaigns/{id}/stats").route(web::get().to(campaigns::stats)))
            .service(
                resource("/unsubscribe/{token}")
                    .route(web::get().to(links::unsubscribe_page))
                    .route(web::post().to(links::unsubscribe)),
            )
            .service(
                resource("/unsubscribe/{token}/resubscribe")
                    .route(web::post().to(links::resubscribe)),
            )
            .service(resource("/t/o/{token}").route(web::get().to(links::open)))
            .service(resource("/t/c/{token}").route(web::get().to(links::click)))
            .service(
                resource("/workflows")
                    .route(web::get().to(workflows::list))
                    .route(web::post().to(workflows::create)),
            )
            .service(
                resource("/workflows/{id}")
                    .route(web::get().to(workflows::get))
                    .route(web::patch().to(workflows::update))
                    .route(web::delete().to(workflows::delete)),
            )
            .service(
                resource("/workflows/{id}/executions").route(web::get().to(workflows::executions)),
            )
            .service(
                resource("/workflows/{id}/executions/{executionId}")
                    .route(web::get().to(workflows::execution)),
            )
            .service(
                resource("/admin/projects")
                    .route(web::get().to(admin::list_projects))
                    .route(web::post().to(admin::create_project)),
            )
            .service(resource("/admin/clock/advance").route(web::post().to(admin::advance_clock)))
            .service(
                resource("/admin/projects/{id}/domains/trust")
                    .route(web::post().to(admin::trust_domain)),
            )
            .service(
                resource("/admin/projects/{id}/{action}")
                    .route(web::post().to(admin::project_action)),
            )
            .configure(|cfg| {
                if dashboard {
                    cfg.service(crate::dashboard::scope());
                }
            })
            .default_service(web::to(not_found)),
    );
}
