//! The server's state, shared by every worker: the engine, and the edge's own parts
//! (limits, budgets, the dashboard's sessions, the cluster node). The API handlers
//! (`http/`) and the dashboard's pages (`dashboard/`) both read it.

use std::sync::Arc;

use mailroom_actors::engine::Engine;

use crate::api::{client_addr, guard};
use crate::config::Settings;
use crate::http::{self, Callbacks, ForwardClient, HitLimit, Metrics, ProjectRateLimit};

/// Shared by every worker.
pub struct AppState {
    /// The engine: every read and write goes through it.
    pub engine: Engine,
    /// The engine's clock, when config made it adjustable (tests): `/admin/clock/advance`.
    pub adjustable_clock: Option<Arc<mailroom_actors::AdjustableClock>>,
    pub limits: crate::config::Limits,
    /// How long an `Idempotency-Key` replays its answer (`retention.idempotency_hours`).
    pub idempotency_ttl_ms: i64,
    pub rate_limit: Option<ProjectRateLimit>,
    pub public_rate_limit: Option<ProjectRateLimit>,
    pub metrics: Metrics,
    pub metrics_enabled: bool,
    pub admin_token: Option<String>,
    /// Wrong admin tokens and sign-in keys, per client (`guard.rs`): one budget for
    /// the admin API and the dashboard, shared by the nodes of a cluster.
    pub guard: guard::Guard,
    /// `server.trusted_proxies`: whose `X-Forwarded-For` names the client.
    pub trusted_proxies: client_addr::TrustedProxies,
    /// How often one email's tracking links are recorded.
    pub hits: HitLimit,
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
    pub forward_client: ForwardClient,
    /// `campaigns.pause_bounce_rate` and `pause_complaint_rate` (for /metrics).
    pub pause_rates: (f64, f64),
    /// Provider callbacks for bounces and complaints (`[feedback]`).
    pub callbacks: Callbacks,
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
        let rate_limit = ProjectRateLimit::new(settings.limits.requests_per_minute);
        let public_rate_limit = ProjectRateLimit::new(settings.limits.public_requests_per_minute);
        // A project that moves to another node keeps what it spent of its budgets.
        for (name, limit) in [("api", &rate_limit), ("api-public", &public_rate_limit)] {
            if let Some(limit) = limit {
                engine.carry_pace(name, limit.pace());
            }
        }
        let dashboard = crate::dashboard::Dashboard::new(&settings.dashboard, store.clone());
        let callbacks = Callbacks::new(&settings.feedback).unwrap_or_default();
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
            metrics: Metrics::new(std::time::Duration::from_millis(
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
            forward_client: http::forward_client(),
            callbacks,
            engine,
            pause_rates: (
                settings.campaigns.pause_bounce_rate,
                settings.campaigns.pause_complaint_rate,
            ),
        }
    }
}
