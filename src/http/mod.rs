//! The HTTP edge: handlers parse, send a message (or read the store) and map the reply.

mod access;
pub mod admin;
pub mod auth;
pub mod body;
pub mod campaigns;
pub mod client_addr;
pub mod contacts;
pub mod contacts_bulk;
pub mod domains;
pub mod envelope;
pub mod error;
pub mod events;
pub mod feedback;
pub mod forward;
pub(crate) mod guard;
pub mod idempotency;
pub mod links;
pub mod metrics;

pub mod openapi;
pub mod ops;
pub mod rate_limit;
pub mod request_id;
pub mod segments;
pub mod send;
pub mod stats;
pub mod suppressions;
pub mod templates;
pub mod track;
pub mod validate;
mod value_de;
pub mod verify;
pub mod webhooks;
pub mod wire;
pub mod workflows;

use std::sync::Arc;

use actix_web::middleware::{from_fn, Condition};
use actix_web::web::{self, ServiceConfig};
use mailroom_actors::engine::Engine;
use mailroom_actors::model::Timestamp;
use mailroom_actors::{Error, Resource};

use crate::config::Settings;
use error::ApiError;

/// Shared by every worker.
pub struct AppState {
    /// The engine: every read and write goes through it.
    pub engine: Engine,
    /// The engine's clock, when config made it adjustable (tests): `/admin/clock/advance`.
    pub adjustable_clock: Option<Arc<mailroom_actors::AdjustableClock>>,
    pub limits: crate::config::Limits,
    /// How long an `Idempotency-Key` replays its answer (`retention.idempotency_hours`).
    pub idempotency_ttl_ms: i64,
    pub rate_limit: Option<rate_limit::ProjectRateLimit>,
    pub public_rate_limit: Option<rate_limit::ProjectRateLimit>,
    pub metrics: metrics::Metrics,
    pub metrics_enabled: bool,
    pub admin_token: Option<String>,
    /// Wrong admin tokens and sign-in keys, per client (`guard.rs`): one budget for
    /// the admin API and the dashboard, shared by the nodes of a cluster.
    pub guard: guard::Guard,
    /// `server.trusted_proxies`: whose `X-Forwarded-For` names the client.
    pub trusted_proxies: client_addr::TrustedProxies,
    /// How often one email's tracking links are recorded.
    pub hits: links::HitLimit,
    /// `log.access`: a log line per request.
    pub access_log: bool,
    /// The web dashboard's sessions and settings.
    pub dashboard: crate::dashboard::Dashboard,
    /// This node of a cluster (PostgreSQL); None with sled, where the server owns every
    /// project.
    pub cluster: Option<Arc<crate::cluster::ClusterNode>>,
    /// `cluster.node_id` as resolved (with sled too: /health names the server).
    pub node_id: String,
    /// `sled` or `postgres`, for /health.
    pub backend: &'static str,
    /// Passes requests to the owner of their project (forward.rs).
    pub forward_client: forward::ForwardClient,
    /// `campaigns.pause_bounce_rate` and `pause_complaint_rate` (for /metrics).
    pub pause_rates: (f64, f64),
    /// Provider callbacks for bounces and complaints (`[feedback]`).
    pub callbacks: feedback::Callbacks,
}

impl AppState {
    /// The edge's state around a started engine. `adjustable_clock`, `cluster` and
    /// `node_id` are the server's to say (`app.rs`).
    pub fn new(
        settings: &Settings,
        engine: Engine,
        adjustable_clock: Option<Arc<mailroom_actors::AdjustableClock>>,
        cluster: Option<Arc<crate::cluster::ClusterNode>>,
        node_id: String,
    ) -> Self {
        let (store, resolver) = (engine.store(), engine.resolver());
        let rate_limit = rate_limit::ProjectRateLimit::new(settings.limits.requests_per_minute);
        let public_rate_limit =
            rate_limit::ProjectRateLimit::new(settings.limits.public_requests_per_minute);
        // A project that moves to another node keeps what it spent of its budgets.
        for (name, limit) in [("api", &rate_limit), ("api-public", &public_rate_limit)] {
            if let Some(limit) = limit {
                engine.carry_pace(name, limit.pace());
            }
        }
        let dashboard = crate::dashboard::Dashboard::new(&settings.dashboard, store.clone());
        let callbacks = feedback::Callbacks::new(&settings.feedback).unwrap_or_default();
        if let Some(ses) = &callbacks.ses {
            // The certificate's fetch follows the webhooks' address rules and timeout.
            let hooks = engine.webhook_config();
            ses.connect(
                resolver.clone(),
                hooks.allow_private_addresses,
                std::time::Duration::from_millis(hooks.timeout_ms),
            );
        }
        AppState {
            guard: guard::Guard::new(store.guard_counts()),
            adjustable_clock,
            limits: settings.limits.clone(),
            idempotency_ttl_ms: settings.retention.engine().idempotency_ttl_ms(),
            rate_limit,
            public_rate_limit,
            metrics: metrics::Metrics::new(std::time::Duration::from_millis(
                settings.metrics.scan_interval_ms,
            )),
            metrics_enabled: settings.metrics.enabled,
            admin_token: settings.admin.token().map(str::to_owned),
            trusted_proxies: settings.server.trusted_proxies().unwrap_or_default(),
            hits: Default::default(),
            access_log: settings.log.access,
            dashboard,
            cluster,
            node_id,
            backend: match settings.storage.backend {
                crate::config::Backend::Sled => "sled",
                crate::config::Backend::Postgres => "postgres",
            },
            forward_client: forward::client(),
            callbacks,
            engine,
            pause_rates: (
                settings.campaigns.pause_bounce_rate,
                settings.campaigns.pause_complaint_rate,
            ),
        }
    }
}

pub fn now_iso() -> String {
    Timestamp::from(chrono::Utc::now()).to_iso()
}

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
