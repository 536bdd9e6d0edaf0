//! Building and running the server: open the store, start the actor tree, bind, serve
//! until SIGTERM or SIGINT, then drain (in-flight requests finish, in-flight emails get
//! their outcomes written, campaign runners and workflow executors park at a step
//! boundary), flush and exit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::dev::Server;
use actix_web::{web, App, HttpServer};
use mailroom_actors::engine::cluster::Ownership;
use mailroom_actors::engine::config::DnsConfig;
use mailroom_actors::engine::config::{
    DispatcherConfig, RegistryConfig, SmtpSecurity, TransportConfig,
};
use mailroom_actors::engine::feedback::Resolver;
use mailroom_actors::engine::ops::Drain;
use mailroom_actors::engine::{Engine, EngineConfig, LinksConfig, WorkflowsConfig};
use mailroom_actors::store::Store;
use mailroom_actors::{AdjustableClock, Clock, SystemClock};

use crate::config::Settings;
use crate::control::{self, Control};
use crate::failure::Failure;
use crate::http;
use crate::listen::{self, LinksUrl};
use crate::startup;
use crate::state::AppState;

/// A bound, not yet awaited server, and what it needs to shut down cleanly.
pub struct Application {
    server: Server,
    addrs: Vec<SocketAddr>,
    store: Arc<dyn Store>,
    /// The control socket to remove at shutdown, when one was made.
    socket: Option<PathBuf>,
    /// A configured public URL to check once serving, with the check's timeout.
    public_url_check: Option<(String, u64, Arc<Resolver>)>,
    /// Closed at a stop; background work ends at a step boundary behind it.
    drain: Arc<Drain>,
    /// How long the stop may take, requests and drain together.
    shutdown_timeout: Duration,
    /// This node of a cluster: at a stop it hands its projects over.
    cluster: Option<Arc<crate::cluster::ClusterNode>>,
    /// The engine (in the edge's state), held until the end of `run`: its supervisors
    /// restart the dispatcher and the Scheduler only while their addresses live, and
    /// the hand-over at a stop still needs them after the HTTP server is gone.
    _state: web::Data<AppState>,
}

impl Application {
    /// Must be called inside an actix System (the actors need it).
    pub fn build(settings: Settings) -> Result<Application, Failure> {
        settings
            .admin
            .check()
            .map_err(|e| Failure::said(e.to_string()))?;
        settings.links.check().map_err(Failure::said)?;
        settings.server.trusted_proxies().map_err(Failure::said)?;
        crate::http::Callbacks::new(&settings.feedback).map_err(Failure::said)?;
        // Bound now: a port in use stops the start, as the HTTP port's does.
        let feedback_tls = settings.feedback.tls().map_err(Failure::said)?;
        let feedback_listener =
            match settings.feedback.smtp_listen().map_err(Failure::said)? {
                None => None,
                Some(addr) => Some(std::net::TcpListener::bind(addr).map_err(|e| {
                    Failure::caused(format!("binding feedback.smtp_listen {addr}"), e)
                })?),
            };
        // Before anything starts: a port in use then stops nothing half-started, and the
        // links below can name the port actually bound.
        let listeners = listen::bind(&settings.server.host, settings.server.port)?;
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Failure::caused("reading the bound address", e))?;
        let links_url = LinksUrl::new(settings.server.public_url(), &addrs)?;
        let store: Arc<dyn Store> = settings.storage.open_node().map_err(Failure::engine)?;
        // An adjustable clock only when config asks for it (tests): the admin API can then
        // move it forward.
        let adjustable = settings
            .clock
            .adjustable
            .then(|| Arc::new(AdjustableClock::default()));
        let clock: Arc<dyn Clock> = match &adjustable {
            Some(c) => c.clone(),
            None => Arc::new(SystemClock),
        };
        // A store with a lease table (PostgreSQL) makes this server a node of a cluster.
        let leases = store.cluster();
        let clustered = leases.is_some();
        let identity = match crate::cluster::Identity::resolve(&settings, addrs[0]) {
            Ok(identity) => identity,
            Err(e) if clustered => return Err(Failure::said(e)),
            // Alone (sled), the server only needs a name for /health.
            Err(_) => crate::cluster::Identity::alone(&settings, addrs[0]),
        };
        // On PostgreSQL a node owns the projects whose leases it holds, none to begin
        // with; on sled it owns them all.
        let ownership = if clustered {
            Ownership::none()
        } else {
            Ownership::everything()
        };
        let engine = Engine::start(
            engine_config(&settings, &links_url.url)?,
            store.clone(),
            clock.clone(),
            ownership,
        )
        .map_err(|e| Failure::caused(e.what, e.source))?;
        let resolver = engine.resolver().clone();
        let projects = engine.projects().clone();
        let project_count = projects
            .list()
            .map_err(|e| Failure::caused("counting the projects", e))?
            .len();
        let public_url_check = (!links_url.derived).then(|| {
            (
                links_url.url.clone(),
                settings.server.public_url_check_ms,
                resolver.clone(),
            )
        });
        let drain = engine.drain().clone();
        let cluster = match leases {
            Some(leases) => {
                if identity.secret.is_none() {
                    tracing::warn!(
                        "cluster.secret is empty: this node neither forwards requests to the owner of their project nor accepts forwarded ones; requests for projects another node owns answer 503 NOT_OWNER"
                    );
                }
                let node = crate::cluster::ClusterNode::new(
                    identity.clone(),
                    leases,
                    engine.handover(),
                    projects.clone(),
                );
                node.start();
                tracing::info!(node = %identity.node_id, url = %identity.advertise_url, lease_seconds = identity.lease.as_secs(), "cluster node started");
                Some(node)
            }
            None => None,
        };
        let socket = if settings.control.enabled {
            control::listen(
                &settings.control_socket(),
                Control {
                    projects: projects.clone(),
                    admin: engine.admin(),
                    store: store.clone(),
                    clock: clock.clone(),
                    domain_records: engine.domains().policy().clone(),
                    max_domains: settings.limits.max_domains,
                    read_timeout: Duration::from_secs(settings.control.timeout_seconds.max(1)),
                    whole: clustered.then(|| settings.storage.clone()),
                    cluster: cluster.clone(),
                },
            )
        } else {
            None
        };
        let return_domain = engine.return_path_domain();
        let state = AppState::new(
            &settings,
            engine,
            adjustable,
            cluster.clone(),
            identity.node_id.clone(),
        );
        // Reports mailed to the return path: the receiving SMTP server.
        if let (Some(listener), Some(domain)) = (feedback_listener, return_domain) {
            let addr = listener
                .local_addr()
                .map_err(|e| Failure::caused("the feedback SMTP address", e))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| Failure::caused("the feedback SMTP listener", e))?;
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| Failure::caused("the feedback SMTP listener", e))?;
            state.engine.feedback().start_receiver(
                listener,
                settings.feedback.engine(),
                settings.feedback.receiver(&domain, feedback_tls.clone()),
            );
            tracing::info!(%addr, domain = %domain, "feedback SMTP listening");
            println!("feedback SMTP listening on {addr}");
        }
        let state = web::Data::new(state);
        let held = state.clone();
        let workers = match settings.server.workers {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let mut server = HttpServer::new(move || {
            App::new().configure(|cfg| http::configure(cfg, state.clone()))
        })
        .workers(workers)
        .shutdown_timeout(settings.server.shutdown_timeout_seconds)
        // Signals are ours (`run`): the stop closes the drain together with the listener.
        .disable_signals();
        for listener in listeners {
            server = server
                .listen(listener)
                .map_err(|e| Failure::caused("listening", e))?;
        }
        startup::log_summary(&settings, &links_url, project_count);
        Ok(Application {
            _state: held,
            server: server.run(),
            addrs,
            store,
            socket,
            public_url_check,
            drain,
            shutdown_timeout: Duration::from_secs(settings.server.shutdown_timeout_seconds),
            cluster,
        })
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Serves until a shutdown signal, then flushes the store.
    pub async fn run(self) -> Result<(), Failure> {
        for addr in &self.addrs {
            // A line on stdout that scripts and the test harness read to find the port.
            println!("mailroom listening on http://{addr}");
            tracing::info!(%addr, "listening");
        }
        if let Some((url, timeout_ms, resolver)) = self.public_url_check {
            startup::check_public_url(url, timeout_ms, resolver);
        }
        let handle = self.server.handle();
        let mut server = actix_web::rt::spawn(self.server);
        let signalled = tokio::select! {
            served = &mut server => Some(served),
            _ = stop_signal() => None,
        };
        let served = match signalled {
            Some(served) => served,
            None => {
                let started = Instant::now();
                let at_stop = self.drain.begin();
                tracing::info!(
                    deliveries = at_stop.deliveries,
                    campaign_batches = at_stop.campaign_batches,
                    workflow_steps = at_stop.workflow_steps,
                    timeout_seconds = self.shutdown_timeout.as_secs(),
                    "stopping: no new requests or background work; draining what is under way"
                );
                let (_, left) =
                    tokio::join!(handle.stop(true), self.drain.idle(self.shutdown_timeout));
                let ms = started.elapsed().as_millis() as u64;
                if left.total() == 0 {
                    tracing::info!(
                        drained = at_stop.total(),
                        ms,
                        "drained: every email handed to the relay has its outcome written"
                    );
                } else {
                    // What the timeout cut short is what a crash would: an email whose
                    // outcome is not written goes again at the next start.
                    tracing::warn!(
                        deliveries = left.deliveries,
                        campaign_batches = left.campaign_batches,
                        workflow_steps = left.workflow_steps,
                        ms,
                        "the drain ran out of server.shutdown_timeout_seconds; what is left resumes at the next start"
                    );
                }
                server.await
            }
        };
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
        if let Some(cluster) = &self.cluster {
            // The others take over at once, instead of when the leases run out.
            if tokio::time::timeout(self.shutdown_timeout, cluster.release_all())
                .await
                .is_err()
            {
                tracing::warn!("handing the projects over did not finish in time; their leases run out by themselves");
            }
        }
        served
            .map_err(|e| Failure::said(format!("the HTTP server stopped: {e}")))?
            .map_err(|e| Failure::caused("the HTTP server", e))?;
        tracing::info!("stopped; flushing the store");
        let store = self.store.clone();
        let flushed = tokio::time::timeout(
            Duration::from_secs(30),
            actix_web::rt::task::spawn_blocking(move || store.flush_blocking()),
        )
        .await;
        match flushed {
            Ok(Ok(Ok(()))) => {
                tracing::info!("store flushed; bye");
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(Failure::caused("flushing the store at shutdown", e)),
            _ => Err(Failure::said(
                "flushing the store at shutdown did not finish",
            )),
        }
    }
}

/// Resolves at SIGTERM or SIGINT (Ctrl-C).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The TLS settings for the relay, built once so that a bad CA file or server name stops
/// start-up rather than failing every delivery.
fn smtp_security(s: &crate::config::Smtp) -> Result<SmtpSecurity, Failure> {
    use crate::config::SmtpTls;
    let extra_roots = match s.tls_ca_file() {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Failure::caused(format!("reading smtp.tls_ca_file {}", path.display()), e)
        })?),
        None => None,
    };
    let name = s.tls_server_name();
    match s.tls {
        SmtpTls::None => Ok(SmtpSecurity::None),
        SmtpTls::Starttls => SmtpSecurity::starttls(name, extra_roots.as_deref()),
        SmtpTls::Tls => SmtpSecurity::implicit(name, extra_roots.as_deref()),
    }
    .map_err(|e| Failure::caused("the relay's TLS settings", e))
}

/// The engine's config, from the server's settings; `links_url` is where links point.
fn engine_config(settings: &Settings, links_url: &str) -> Result<EngineConfig, Failure> {
    use crate::config::MailTransport;
    let transport = match settings.mail.transport {
        MailTransport::File => TransportConfig::File {
            dir: settings.outbox_dir(),
        },
        MailTransport::Smtp => {
            let s = &settings.smtp;
            TransportConfig::Smtp {
                host: s.host.clone(),
                port: s.port,
                security: smtp_security(s)?,
                credentials: (!s.username.is_empty())
                    .then(|| (s.username.clone(), s.password.clone())),
                pool_size: s.pool_size as usize,
                timeout: Duration::from_millis(s.timeout_ms),
            }
        }
    };
    Ok(EngineConfig {
        registry: RegistryConfig {
            arbiters: settings.actors.arbiters,
            mailbox_capacity: settings.actors.mailbox_capacity,
            render_threads: settings.templates.render_threads(),
            tenant: settings.limits.tenant(),
            max_entries_per_day: settings.workflows.max_entries_per_day,
            erasure_slice: settings.erasure.slice,
            import_slice_rows: settings.limits.import_slice_rows,
            templates: settings.templates.limits(),
        },
        links: LinksConfig {
            base_url: links_url.to_owned(),
            tracking: settings.tracking.enabled,
            unsubscribe_valid_days: settings.links.unsubscribe_valid_days,
            sender_id: settings.feedback.sender_id.clone(),
        },
        return_path_domain: settings.feedback.return_path_domain().map(str::to_owned),
        transport,
        mailers: settings.mailer.workers,
        dispatcher: DispatcherConfig {
            rate_per_second: settings.sending.rate_per_second,
            max_attempts: settings.sending.max_attempts.max(1),
            retry_base_ms: settings.sending.retry_base_ms,
            max_in_flight: settings.sending.max_in_flight.max(1),
        },
        dns: DnsConfig {
            nameservers: DnsConfig::parse_nameservers(&settings.dns.nameservers)
                .map_err(|e| Failure::caused("the DNS settings", e))?,
            timeout: Duration::from_millis(settings.dns.timeout_ms.max(1)),
            cache_size: settings.dns.cache_size,
        },
        workflows: WorkflowsConfig {
            executor: settings.workflows.executor(),
            allow_private_webhooks: settings.workflows.allow_private_webhooks,
            webhook_timeout: Duration::from_secs(settings.workflows.webhook_timeout_seconds.max(1)),
        },
        campaigns: settings.campaigns.runner(),
        domain_records: settings.record_policy(),
        domain_recheck: Duration::from_secs(settings.domains.recheck_seconds),
        retention: settings.retention.engine(),
        webhooks: settings.webhooks.engine(settings.limits.max_webhooks),
    })
}

/// `mailroom serve`: applies the CLI flags (the last layer), then runs to completion.
pub fn serve_blocking(mut settings: Settings, args: ServeArgs) -> Result<(), Failure> {
    if let Some(host) = args.host {
        settings.server.host = host;
    }
    if let Some(port) = args.port {
        settings.server.port = port;
    }
    crate::logging::init(&settings.log);
    actix_web::rt::System::new().block_on(async move {
        let app = Application::build(settings)?;
        app.run().await
    })
}

/// The `serve` command's flags (the CLI parses them; serving is this module's).
/// `--data-dir` is every command's, on the CLI itself.
#[derive(Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (overrides server.host).
    #[arg(long)]
    pub host: Option<String>,
    /// Port to listen on; 0 picks a free one (overrides server.port). Links in emails
    /// follow it unless server.public_url is set.
    #[arg(long)]
    pub port: Option<u16>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `EngineConfig::new` says it is the server's defaults (but for retention, which an
    /// embedded engine keeps): the two must not drift apart.
    #[test]
    fn an_embedded_engine_starts_with_the_servers_defaults() {
        let settings = Settings::load(None).expect("the embedded defaults");
        let server = engine_config(&settings, "http://127.0.0.1:8080").expect("a config");
        let embedded = EngineConfig::new(server.transport.clone(), server.links.clone());
        let shown = |c: &EngineConfig| {
            format!(
                "{:?}",
                (
                    c.registry,
                    &c.return_path_domain,
                    c.mailers,
                    c.dispatcher,
                    &c.dns,
                    c.workflows,
                    c.campaigns,
                    &c.domain_records,
                    c.domain_recheck,
                    &c.webhooks,
                )
            )
        };
        assert_eq!(shown(&embedded), shown(&server));
    }
}
