//! The web dashboard at `/app`: pages rendered on the server (maud), a few lines of
//! plain JavaScript for the live parts, one stylesheet. A page reads its form into the
//! API's typed request (`crate::api`), calls the engine through its door as the API's
//! handler does (it cannot call the handler: `http`'s modules are private), and resolves
//! the project from the session alone, never from a form or a path.

mod assets;
mod auth;
mod campaigns;
mod chart;
mod contacts;
mod domains;
mod error;
mod events;
mod imports;
mod layout;
mod overview;
mod segments;
pub mod session;
mod settings;
mod sign_in;
mod suppressions;
mod templates;
mod webhooks;
mod workflows;

use actix_web::http::header;
use actix_web::middleware::DefaultHeaders;
use actix_web::web::{self, ServiceConfig};
use actix_web::HttpResponse;

pub use auth::{Posted, Signed};
pub use error::PageError;

/// The dashboard's part of the shared state.
pub struct Dashboard {
    pub enabled: bool,
    pub sessions: session::Sessions,
    /// How long a session lasts from its sign-in.
    pub lifetime_ms: i64,
    /// `Secure` on the cookies even when the request did not come over https (a TLS
    /// proxy in front that does not say so).
    pub secure_cookie: bool,
}

impl Dashboard {
    pub fn new(
        settings: &crate::config::DashboardSettings,
        store: std::sync::Arc<dyn mailroom_actors::store::Store>,
    ) -> Self {
        Dashboard {
            enabled: settings.enabled,
            sessions: session::Sessions::new(store),
            lifetime_ms: i64::from(settings.session_minutes.max(1)).saturating_mul(60_000),
            secure_cookie: settings.secure_cookie,
        }
    }
}

/// What every dashboard answer carries: no inline script or style runs, no other
/// origin is reached, nothing frames the page, and nothing is cached but the assets.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'";

pub fn scope() -> impl actix_web::dev::HttpServiceFactory {
    web::scope("/app")
        .wrap(
            DefaultHeaders::new()
                .add((header::CONTENT_SECURITY_POLICY, CSP))
                .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
                .add((header::REFERRER_POLICY, "no-referrer"))
                .add((header::X_FRAME_OPTIONS, "DENY"))
                .add((header::CACHE_CONTROL, "no-store")),
        )
        .configure(routes)
}

fn routes(cfg: &mut ServiceConfig) {
    cfg.route("", web::get().to(home))
        .route("/", web::get().to(home))
        .route("/static/{name}", web::get().to(assets::serve))
        .route("/sign-in", web::get().to(sign_in::form))
        .route("/sign-in", web::post().to(sign_in::submit))
        .route("/sign-out", web::post().to(sign_in::sign_out))
        .route("/projects", web::get().to(sign_in::projects))
        .route("/projects", web::post().to(sign_in::pick))
        .route("/overview", web::get().to(overview::page))
        .route("/contacts", web::get().to(contacts::list))
        .route("/contacts/import", web::get().to(imports::form))
        .route("/contacts/import", web::post().to(imports::start))
        .route("/contacts/export", web::get().to(contacts::export))
        .route("/contacts/imports/{id}", web::get().to(imports::show))
        .route(
            "/contacts/imports/{id}/progress",
            web::get().to(imports::progress),
        )
        .route("/contacts/{id}", web::get().to(contacts::show))
        .route("/contacts/{id}", web::post().to(contacts::edit))
        .route("/contacts/{id}/delete", web::post().to(contacts::delete))
        .route("/segments", web::get().to(segments::list))
        .route("/segments", web::post().to(segments::create))
        .route("/segments/count", web::post().to(segments::count))
        .route("/segments/preview", web::post().to(segments::preview))
        .route("/templates", web::get().to(templates::list))
        .route("/templates", web::post().to(templates::create))
        .route("/templates/preview", web::post().to(templates::preview))
        .route("/templates/{id}", web::get().to(templates::show))
        .route("/templates/{id}", web::post().to(templates::update))
        .route("/templates/{id}/test", web::post().to(templates::test))
        .route("/campaigns", web::get().to(campaigns::list))
        .route("/campaigns", web::post().to(campaigns::create))
        .route("/campaigns/{id}", web::get().to(campaigns::show))
        .route("/campaigns/{id}/stats", web::get().to(campaigns::stats))
        .route("/campaigns/{id}/test", web::post().to(campaigns::test))
        .route("/campaigns/{id}/send", web::post().to(campaigns::send))
        .route("/campaigns/{id}/cancel", web::post().to(campaigns::cancel))
        .route("/campaigns/{id}/resume", web::post().to(campaigns::resume))
        .route("/workflows", web::get().to(workflows::list))
        .route("/workflows/{id}", web::get().to(workflows::show))
        .route(
            "/workflows/{id}/enabled",
            web::post().to(workflows::set_enabled),
        )
        .route("/events", web::get().to(events::list))
        .route("/webhooks", web::get().to(webhooks::list))
        .route("/webhooks", web::post().to(webhooks::create))
        .route("/webhooks/{id}/enabled", web::post().to(webhooks::enabled))
        .route("/webhooks/{id}/delete", web::post().to(webhooks::delete))
        .route("/webhooks/{id}/test", web::post().to(webhooks::test))
        .route("/suppressions", web::get().to(suppressions::list))
        .route("/suppressions", web::post().to(suppressions::add))
        .route("/suppressions/remove", web::post().to(suppressions::remove))
        .route("/suppressions/import", web::post().to(suppressions::import))
        .route("/domains", web::get().to(domains::list))
        .route("/domains", web::post().to(domains::create))
        .route("/domains/{id}/verify", web::post().to(domains::verify))
        .route("/settings", web::get().to(settings::page))
        .route("/settings/rotate", web::post().to(settings::rotate))
        .default_service(web::to(not_found));
}

async fn home(_: Signed) -> HttpResponse {
    see_other("/app/overview")
}

async fn not_found(_: Signed) -> Result<HttpResponse, PageError> {
    Err(PageError::NotFound)
}

/// A redirect after a form (303: the browser follows it with a GET).
pub fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to))
        .finish()
}
