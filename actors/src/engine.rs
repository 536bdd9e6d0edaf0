//! The engine, assembled in one place: `Engine::start` builds the registry of project
//! actors with its links, the mailers and the dispatcher, the campaign runners, the
//! workflow executors, the Scheduler of durable timers, the domain verifier, the
//! retention purger and the event webhooks' delivery loop, and resumes the erasures and
//! imports that were under way. The server (`src/app.rs`) and the engine's own tests
//! start it the same way, each with its config; what they do with it afterwards (serve
//! HTTP, hand projects over) is theirs.

use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr, Arbiter, Supervisor};

use crate::campaign::{Campaigns as Runners, RunnerConfig};
use crate::cluster::ownership::Ownership;
use crate::directory::Projects;
use crate::dns::{DnsConfig, DnsSetupError, Resolver};
use crate::domain::{DomainVerifier, RecordPolicy};
use crate::error::Error;
use crate::links::Links;
use crate::mailer::return_path::ReturnPath;
use crate::mailer::{Dispatcher, DispatcherConfig, MailerActor, TransportConfig};
use crate::project::{Registry, RegistryConfig};
use crate::render::TemplateCache;
use crate::retention::{Purger, Retention};
use crate::scheduler::{Fire, Scheduler, Timer, TimerKind};
use crate::store::Store;
use crate::verify::EmailVerifier;
use crate::webhooks::deliver::Deliverer;
use crate::webhooks::WebhookConfig;
use crate::workflow::{ExecutorConfig, Executors, WebhookClient};
use crate::Clock;

pub mod campaigns;
pub mod cluster;
pub mod config;
pub mod contacts;
pub mod domains;
pub mod emails;
pub mod events;
pub mod feedback;
pub mod links;
pub mod offline;
pub mod ops;
pub mod projects;
pub mod requests;
pub mod segments;
pub mod suppressions;
pub mod templates;
pub mod webhooks;
pub mod workflows;

pub(crate) use crate::store::off_thread;

/// Everything the engine is started with.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub registry: RegistryConfig,
    pub links: LinksConfig,
    /// `feedback.return_path_domain`: the envelope sender's domain, when bounces come back
    /// to this server.
    pub return_path_domain: Option<String>,
    /// Where emails go (an SMTP relay, or files).
    pub transport: TransportConfig,
    /// Mailer actors, each on its own thread.
    pub mailers: usize,
    pub dispatcher: DispatcherConfig,
    pub dns: DnsConfig,
    pub workflows: WorkflowsConfig,
    pub campaigns: RunnerConfig,
    /// What a domain must publish, and how often verified domains are checked again.
    pub domain_records: RecordPolicy,
    pub domain_recheck: Duration,
    pub retention: Retention,
    /// Event webhooks: their rules, and how their client calls endpoints.
    pub webhooks: WebhookConfig,
}

impl EngineConfig {
    /// An engine that sends through `transport` and signs links for `links`, with the
    /// server's default (config/default.toml) for everything else but retention, which
    /// keeps every record (an embedded engine or a test sets what it needs; the server
    /// sets every field from its config, `src/app.rs`, whose test keeps the two equal).
    pub fn new(transport: TransportConfig, links: LinksConfig) -> EngineConfig {
        EngineConfig {
            registry: RegistryConfig {
                arbiters: 2,
                mailbox_capacity: 4096,
                render_threads: 2,
                ..RegistryConfig::default()
            },
            links,
            return_path_domain: None,
            transport,
            mailers: 4,
            dispatcher: DispatcherConfig {
                rate_per_second: 14,
                max_attempts: 5,
                retry_base_ms: 1_000,
                max_in_flight: 32,
            },
            dns: DnsConfig {
                nameservers: Vec::new(),
                timeout: Duration::from_millis(2_000),
                cache_size: 10_000,
            },
            workflows: WorkflowsConfig {
                executor: ExecutorConfig {
                    workers: 128,
                    bounds: crate::workflow::records::Bounds {
                        max_history: 100,
                        max_finished: 1_000,
                    },
                },
                allow_private_webhooks: false,
                webhook_timeout: Duration::from_secs(10),
            },
            campaigns: RunnerConfig::default(),
            domain_records: RecordPolicy::new("include:_spf.mailroom.local", None),
            domain_recheck: Duration::from_secs(300),
            retention: Retention {
                email_content_days: None,
                emails_days: None,
                events_days: None,
                executions_days: None,
                webhook_deliveries_days: None,
                idempotency_hours: None,
                slice_keys: 100,
                interval: Duration::from_secs(600),
            },
            webhooks: WebhookConfig::default(),
        }
    }
}

/// The links in marketing mail (`Links`), but for the key, which the store keeps.
#[derive(Clone, Debug)]
pub struct LinksConfig {
    /// Where links point: `server.public_url`, or the address the server bound.
    pub base_url: String,
    pub tracking: bool,
    pub unsubscribe_valid_days: u32,
    /// `feedback.sender_id`, in each Message-ID.
    pub sender_id: String,
}

/// Workflow executors and the client of their WEBHOOK steps.
#[derive(Clone, Copy, Debug)]
pub struct WorkflowsConfig {
    pub executor: ExecutorConfig,
    pub allow_private_webhooks: bool,
    pub webhook_timeout: Duration,
}

/// What failed while the engine started, with the step it was at.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct StartError {
    pub what: &'static str,
    #[source]
    pub source: StartCause,
}

#[derive(Debug, thiserror::Error)]
pub enum StartCause {
    #[error(transparent)]
    Engine(#[from] Error),
    #[error(transparent)]
    Dns(#[from] DnsSetupError),
}

fn at<E: Into<StartCause>>(what: &'static str) -> impl FnOnce(E) -> StartError {
    move |e| StartError {
        what,
        source: e.into(),
    }
}

/// A started engine. Its workers run until the actix System ends; the supervised ones
/// are restarted while this is held.
pub struct Engine {
    registry: Registry,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    projects: Projects,
    resolver: Arc<Resolver>,
    templates: Arc<TemplateCache>,
    runners: Arc<Runners>,
    email_verifier: EmailVerifier,
    domain_records: RecordPolicy,
    webhooks: WebhookConfig,
    webhook_client: Arc<WebhookClient>,
    return_path: Option<Arc<ReturnPath>>,
    _supervised: (Addr<Dispatcher>, Addr<Scheduler>),
}

impl Engine {
    /// Starts the engine on `store`, serving the projects `ownership` says (everything
    /// alone; none to begin with on a node of a cluster). Must be called inside a running
    /// actix System.
    pub fn start(
        config: EngineConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        ownership: Arc<Ownership>,
    ) -> Result<Engine, StartError> {
        let link_key = Links::load_key(&*store).map_err(at("reading the link key"))?;
        let links = Links::new(
            link_key,
            &config.links.base_url,
            config.links.tracking,
            config.links.unsubscribe_valid_days,
        )
        .with_sender_id(&config.links.sender_id);
        let registry = Registry::with_ownership(
            store.clone(),
            clock.clone(),
            config.registry,
            links,
            ownership,
            crate::wiring::hooks(),
        );
        let return_path = config
            .return_path_domain
            .as_deref()
            .map(|d| Arc::new(ReturnPath::new(d, &link_key)));
        let dispatcher = start_delivery(
            &config,
            store.clone(),
            clock.clone(),
            registry.clone(),
            return_path.clone(),
        );
        let resolver = Resolver::new(&config.dns).map_err(at("the DNS resolver"))?;
        let templates = Arc::new(TemplateCache::new(config.registry.templates));
        let executors = Executors::start(
            registry.clone(),
            templates.clone(),
            WebhookClient::new(
                resolver.clone(),
                config.workflows.allow_private_webhooks,
                config.workflows.webhook_timeout,
            ),
            config.workflows.executor,
        );
        let runners = Runners::new(registry.clone(), config.campaigns);
        // Each runner resumes its share of the SENDING campaigns as it starts.
        runners.watch();
        crate::erasure::runner::resume(&registry).map_err(at("resuming contact erasures"))?;
        crate::contact::import_runner::resume(&registry).map_err(at("resuming contact imports"))?;
        let scheduler = start_timers(
            store.clone(),
            clock.clone(),
            &registry,
            runners.clone(),
            executors,
        );
        DomainVerifier::new(
            registry.clone(),
            resolver.clone(),
            config.domain_records.clone(),
            config.domain_recheck,
        )
        .start();
        Purger::start(
            registry.clone(),
            store.clone(),
            clock.clone(),
            config.retention,
        );
        let webhook_client = Arc::new(WebhookClient::new(
            resolver.clone(),
            config.webhooks.allow_private_addresses,
            Duration::from_millis(config.webhooks.timeout_ms),
        ));
        // Event webhooks: the delivery loop sends only for the projects this engine
        // serves.
        Deliverer::start(
            registry.clone(),
            webhook_client.clone(),
            config.webhooks.clone(),
        );
        Ok(Engine {
            projects: Projects::new(store.clone()),
            email_verifier: EmailVerifier::new(
                resolver.clone(),
                config.dns.cache_size,
                registry.metrics().clone(),
            ),
            registry,
            store,
            clock,
            resolver,
            templates,
            runners,
            domain_records: config.domain_records,
            webhooks: config.webhooks,
            webhook_client,
            return_path,
            _supervised: (dispatcher, scheduler),
        })
    }

    #[cfg(test)]
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The operator's writes to projects, each durable when it answers.
    pub fn admin(&self) -> projects::Admin {
        projects::Admin {
            projects: self.projects.clone(),
            registry: self.registry.clone(),
            store: self.store.clone(),
            clock: self.clock.clone(),
        }
    }

    /// The cluster's handover of projects (owned, for a node's tasks).
    pub fn handover(&self) -> cluster::Handover {
        cluster::Handover(self.registry.clone())
    }

    pub fn projects(&self) -> &Projects {
        &self.projects
    }

    /// Shared by domain checks, /v1/verify and the webhooks' client.
    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.resolver
    }

    /// The contacts' door.
    pub fn contacts(&self) -> contacts::Contacts<'_> {
        contacts::Contacts(self)
    }

    /// The events' door.
    pub fn events(&self) -> events::Events<'_> {
        events::Events(self)
    }

    /// The sender domains' door.
    pub fn domains(&self) -> domains::Domains<'_> {
        domains::Domains(self)
    }

    /// The suppression list's door.
    pub fn suppressions(&self) -> suppressions::Suppressions<'_> {
        suppressions::Suppressions(self)
    }

    /// Delivery reports' door.
    pub fn feedback(&self) -> feedback::Feedback<'_> {
        feedback::Feedback(self)
    }

    /// Hands `pace`'s state of each project over with the project when another node
    /// takes it (the API's request budgets); `name` keys it.
    pub fn carry_pace(&self, name: &str, pace: Arc<crate::pace::Pace>) {
        self.registry.carry_pace(name, pace)
    }

    /// The engine's drain: a stop waits on it for what is under way.
    pub fn drain(&self) -> &Arc<crate::shutdown::Drain> {
        self.registry.drain()
    }

    /// The operator's door: counters, gauges, and waking the workers.
    pub fn ops(&self) -> ops::Ops<'_> {
        ops::Ops(self)
    }

    /// The links' door.
    pub fn links(&self) -> links::Links<'_> {
        links::Links(self)
    }

    /// The emails' door.
    pub fn emails(&self) -> emails::Emails<'_> {
        emails::Emails(self)
    }

    /// The segments' door.
    pub fn segments(&self) -> segments::Segments<'_> {
        segments::Segments(self)
    }

    /// The templates' door.
    pub fn templates(&self) -> templates::Templates<'_> {
        templates::Templates(self)
    }

    /// The workflows' door.
    pub fn workflows(&self) -> workflows::Workflows<'_> {
        workflows::Workflows(self)
    }

    /// The campaigns' door.
    pub fn campaigns(&self) -> campaigns::Campaigns<'_> {
        campaigns::Campaigns(self)
    }

    #[cfg(test)]
    /// The campaign runners (a node's handover starts and stops them).
    pub(crate) fn runners(&self) -> &Arc<Runners> {
        &self.runners
    }

    pub fn email_verifier(&self) -> &EmailVerifier {
        &self.email_verifier
    }

    /// The event webhooks' door.
    pub fn webhooks(&self) -> webhooks::Webhooks<'_> {
        webhooks::Webhooks(self)
    }

    /// The event webhooks' rules: the SES certificate fetch follows its address rules
    /// and timeout.
    pub fn webhook_config(&self) -> &WebhookConfig {
        &self.webhooks
    }

    /// The return path's domain, when bounces come back to this server.
    pub fn return_path_domain(&self) -> Option<String> {
        self.return_path.as_ref().map(|rp| rp.domain().to_owned())
    }
}

/// Starts the mailer pool and the dispatcher, each under a supervisor on its own arbiter.
fn start_delivery(
    config: &EngineConfig,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    registry: Registry,
    return_path: Option<Arc<ReturnPath>>,
) -> Addr<Dispatcher> {
    crate::mailer::mime::warm_up();
    let mailers: Vec<_> = (0..config.mailers.max(1))
        .map(|_| {
            let (t, metrics) = (config.transport.clone(), registry.metrics().clone());
            let faults = registry.faults().clone();
            let return_path = return_path.clone();
            Supervisor::start_in_arbiter(&Arbiter::new().handle(), move |_| {
                MailerActor::new(t.clone(), metrics.clone())
                    .with_faults(faults.clone())
                    .with_return_path(return_path.clone())
            })
        })
        .collect();
    let dkim = crate::mailer::dkim::lookup(store.clone());
    let dispatcher = config.dispatcher;
    Supervisor::start_in_arbiter(&Arbiter::new().handle(), move |_| {
        Dispatcher::new(
            store.clone(),
            clock.clone(),
            registry.clone(),
            mailers.clone(),
            dkim.clone(),
            dispatcher,
        )
    })
}

/// The Scheduler of durable timers: a campaign's start at its time, a workflow's wait.
fn start_timers(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    registry: &Registry,
    campaigns: Arc<Runners>,
    executors: Arc<Executors>,
) -> Addr<Scheduler> {
    let fire: Fire = Arc::new(move |t: Timer| {
        let (campaigns, executors) = (campaigns.clone(), executors.clone());
        Box::pin(async move {
            match t.kind {
                TimerKind::Campaign => campaigns.fire(t).await,
                TimerKind::Workflow => executors.fire(t).await,
            }
        })
    });
    let (timers, faults) = (registry.timers().clone(), registry.faults().clone());
    Supervisor::start_in_arbiter(&Arbiter::new().handle(), move |_| {
        Scheduler::new(timers.clone(), store.clone(), clock.clone(), fire.clone())
            .with_faults(faults.clone())
    })
}
