//! Settings, layered: the embedded `config/default.toml` < the file named by `--config`
//! or `MAILROOM_CONFIG` < `MAILROOM__<SECTION>__<KEY>` environment variables < CLI flags.
//! Every key is documented in `config/default.toml`.

use std::path::{Path, PathBuf};

use config::{Config, Environment, File, FileFormat};
use serde::{Deserialize, Serialize};

pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// The control socket's file name inside the data directory.
pub const CONTROL_SOCKET: &str = "mailroom.sock";

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Settings {
    pub server: Server,
    pub storage: Storage,
    pub cluster: Cluster,
    pub mail: Mail,
    pub smtp: Smtp,
    pub mailer: Mailer,
    pub sending: Sending,
    pub limits: Limits,
    pub retention: RetentionSettings,
    pub templates: Templates,
    pub actors: Actors,
    pub dns: Dns,
    pub domains: Domains,
    pub workflows: Workflows,
    pub webhooks: Webhooks,
    pub feedback: Feedback,
    pub erasure: Erasure,
    pub tracking: Tracking,
    pub links: LinkSettings,
    pub campaigns: Campaigns,
    pub admin: Admin,
    pub metrics: Metrics,
    pub dashboard: DashboardSettings,
    pub log: Log,
    pub control: Control,
    pub clock: ClockSettings,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ClockSettings {
    /// Lets the operator move the clock forward (POST /admin/clock/advance): for tests.
    pub adjustable: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Server {
    pub host: String,
    pub port: u16,
    pub public_url: String,
    pub public_url_check_ms: u64,
    pub workers: usize,
    pub shutdown_timeout_seconds: u64,
    /// Proxies (addresses or CIDR networks) whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<String>,
}

impl Server {
    /// `trusted_proxies`, parsed; the entry that is neither an address nor a network.
    pub fn trusted_proxies(&self) -> Result<crate::api::client_addr::TrustedProxies, String> {
        crate::api::client_addr::TrustedProxies::parse(&self.trusted_proxies)
    }

    /// The configured base for links in emails; None means "follow the listening address".
    pub fn public_url(&self) -> Option<&str> {
        Some(self.public_url.trim())
            .filter(|u| !u.is_empty())
            .map(|u| u.trim_end_matches('/'))
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Storage {
    pub backend: Backend,
    pub path: PathBuf,
    pub cache_capacity_bytes: u64,
    pub wal_checkpoint_bytes: u64,
    pub move_interval_ms: u64,
    pub upgrade_slice: usize,
    pub postgres: PostgresSettings,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sled,
    Postgres,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PostgresSettings {
    pub url: String,
    pub pool_size: usize,
    pub lock_wait_ms: u64,
    pub statement_timeout_ms: u64,
    pub tls: PostgresTls,
    pub ca_file: String,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PostgresTls {
    Disable,
    Require,
    VerifyFull,
}

impl PostgresSettings {
    /// The store's settings for this database at `url` (a node of a cluster when
    /// `partial`).
    pub fn store_config(&self, url: &str, partial: bool) -> mailroom_actors::store::PostgresConfig {
        use mailroom_actors::store::postgres::PgTls;
        mailroom_actors::store::PostgresConfig {
            url: url.to_owned(),
            pool_size: self.pool_size,
            lock_wait_ms: self.lock_wait_ms,
            statement_timeout_ms: self.statement_timeout_ms,
            partial,
            tls: match self.tls {
                PostgresTls::Disable => PgTls::Disable,
                PostgresTls::Require => PgTls::Require,
                PostgresTls::VerifyFull => PgTls::VerifyFull,
            },
            ca_file: Some(self.ca_file.trim())
                .filter(|f| !f.is_empty())
                .map(PathBuf::from),
        }
    }
}

impl Storage {
    /// The data directory, its owner's alone (0700). A directory this process may use
    /// but not change (a volume another user owns) is left as it is, with a warning:
    /// what the process makes in it is private anyway (umask 077).
    fn narrow(&self) -> mailroom_actors::error::Result<()> {
        if let Err(e) = mailroom_actors::store::backup::make_private_dir(&self.path) {
            tracing::warn!(
                dir = %self.path.display(),
                error = %e,
                "could not narrow the data directory to 0700; its files are private all the same"
            );
        }
        Ok(())
    }

    /// Opens the configured store: the data directory (first migrating it if an older
    /// version wrote it), or PostgreSQL (its schema migrated the same way).
    pub fn open(
        &self,
    ) -> mailroom_actors::error::Result<std::sync::Arc<dyn mailroom_actors::store::Store>> {
        self.open_as(false)
    }

    /// Opens the store for `mailroom serve`: on PostgreSQL the server is a node of a
    /// cluster, which holds the global keys and only the projects whose leases it takes
    /// (the store's partial view). The CLI opens it whole (`open`).
    pub fn open_node(
        &self,
    ) -> mailroom_actors::error::Result<std::sync::Arc<dyn mailroom_actors::store::Store>> {
        self.open_as(true)
    }

    fn open_as(
        &self,
        node: bool,
    ) -> mailroom_actors::error::Result<std::sync::Arc<dyn mailroom_actors::store::Store>> {
        use mailroom_actors::store::PostgresStore;
        Ok(match self.backend {
            Backend::Sled => {
                let store = mailroom_actors::engine::offline::open_sled(
                    &self.path,
                    self.sled(),
                    self.upgrade_slice,
                )?;
                // A directory made before the process set its umask (or by an older
                // version) may be open to every local user.
                self.narrow()?;
                store
            }
            Backend::Postgres => {
                if self.postgres.url.trim().is_empty() {
                    return Err(mailroom_actors::error::Error::storage(
                        "storage.backend is \"postgres\" but storage.postgres.url is empty",
                    ));
                }
                // The directory still holds the control socket and the file outbox;
                // with sled, opening the store makes it.
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.path)
                    .map_err(|e| {
                        mailroom_actors::error::Error::storage_caused(
                            format!("creating {}", self.path.display()),
                            e,
                        )
                    })?;
                self.narrow()?;
                PostgresStore::open(&self.postgres.store_config(&self.postgres.url, node))?
            }
        })
    }

    pub fn sled(&self) -> mailroom_actors::store::SledConfig {
        mailroom_actors::store::SledConfig {
            cache_capacity_bytes: self.cache_capacity_bytes,
            wal_checkpoint_bytes: self.wal_checkpoint_bytes,
            move_interval_ms: self.move_interval_ms,
        }
    }
}

/// A node of a cluster (`storage.backend = "postgres"`); docs/cluster.md.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Cluster {
    pub node_id: String,
    pub advertise_url: String,
    pub secret: String,
    pub lease_seconds: u64,
    pub forward_timeout_seconds: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Mail {
    pub transport: MailTransport,
    pub file_dir: PathBuf,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MailTransport {
    File,
    Smtp,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Smtp {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTls,
    pub tls_ca_file: String,
    pub tls_server_name: String,
    pub username: String,
    pub password: String,
    pub pool_size: u32,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    None,
    Starttls,
    Tls,
}

impl Smtp {
    /// The extra trusted roots file, when set.
    pub fn tls_ca_file(&self) -> Option<&Path> {
        Some(self.tls_ca_file.as_str())
            .filter(|f| !f.is_empty())
            .map(Path::new)
    }

    /// The name the relay's certificate must carry: `tls_server_name`, else `host`.
    pub fn tls_server_name(&self) -> &str {
        if self.tls_server_name.is_empty() {
            &self.host
        } else {
            &self.tls_server_name
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Mailer {
    pub workers: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Sending {
    pub rate_per_second: u32,
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    pub max_in_flight: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Limits {
    pub requests_per_minute: u32,
    pub public_requests_per_minute: u32,
    pub max_body_bytes: usize,
    pub max_import_bytes: usize,
    pub import_slice_rows: usize,
    pub max_running_imports: u64,
    pub max_data_bytes: usize,
    pub max_project_data_bytes: u64,
    pub max_contacts: u64,
    pub max_domains: usize,
    pub max_segments: u64,
    pub max_tracked_segments: usize,
    pub max_templates: usize,
    pub max_campaigns: u64,
    pub max_workflows: u64,
    pub max_webhooks: usize,
    pub max_filter_evaluations: u64,
}

impl Limits {
    pub fn tenant(&self) -> mailroom_actors::engine::config::TenantLimits {
        mailroom_actors::engine::config::TenantLimits {
            max_contacts: self.max_contacts,
            max_data_bytes: self.max_data_bytes,
            max_project_data_bytes: self.max_project_data_bytes,
            max_domains: self.max_domains,
            max_segments: self.max_segments,
            max_tracked_segments: self.max_tracked_segments,
            max_templates: self.max_templates,
            max_campaigns: self.max_campaigns,
            max_workflows: self.max_workflows,
            max_filter_evaluations: self.max_filter_evaluations,
        }
    }
}

/// `[retention]`: how long each kind of record is kept (0: for ever).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RetentionSettings {
    pub email_content_days: u32,
    pub emails_days: u32,
    pub events_days: u32,
    pub executions_days: u32,
    pub webhook_deliveries_days: u32,
    pub idempotency_hours: u32,
    pub interval_seconds: u64,
    pub slice_keys: usize,
}

impl RetentionSettings {
    pub fn engine(&self) -> mailroom_actors::engine::config::Retention {
        let keep = |n: u32| Some(n).filter(|n| *n > 0);
        mailroom_actors::engine::config::Retention {
            email_content_days: keep(self.email_content_days),
            emails_days: keep(self.emails_days),
            events_days: keep(self.events_days),
            executions_days: keep(self.executions_days),
            webhook_deliveries_days: keep(self.webhook_deliveries_days),
            idempotency_hours: keep(self.idempotency_hours),
            slice_keys: self.slice_keys.max(1),
            interval: std::time::Duration::from_secs(self.interval_seconds.max(1)),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Templates {
    pub max_steps: u64,
    pub max_output_bytes: u64,
    pub max_nesting: usize,
    pub max_operators: usize,
    pub max_parse_units: u64,
    pub render_threads: usize,
}

impl Templates {
    pub fn limits(&self) -> mailroom_actors::engine::config::RenderLimits {
        mailroom_actors::engine::config::RenderLimits {
            max_steps: self.max_steps,
            max_output_bytes: self.max_output_bytes,
            max_nesting: self.max_nesting,
            max_operators: self.max_operators,
            max_parse_units: self.max_parse_units,
        }
    }

    pub fn render_threads(&self) -> usize {
        match self.render_threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Actors {
    pub arbiters: usize,
    pub mailbox_capacity: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Dns {
    pub nameservers: Vec<String>,
    pub timeout_ms: u64,
    pub cache_size: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Domains {
    pub recheck_seconds: u64,
    pub spf_include: String,
}

/// Event webhooks to the caller (API.md 26).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Webhooks {
    pub timeout_seconds: u64,
    pub retry_seconds: Vec<u64>,
    pub disable_after_hours: u64,
    pub allow_private_addresses: bool,
    pub max_in_flight: usize,
    pub max_in_flight_per_endpoint: usize,
    pub max_in_flight_per_project: usize,
    /// The least time between two rounds of the delivery loop.
    pub round_gap_ms: u64,
}

impl Webhooks {
    pub fn engine(&self, max_webhooks: usize) -> mailroom_actors::engine::config::WebhookConfig {
        mailroom_actors::engine::config::WebhookConfig {
            retry_seconds: self.retry_seconds.clone(),
            timeout_ms: self.timeout_seconds.max(1) * 1000,
            disable_after_hours: self.disable_after_hours,
            allow_private_addresses: self.allow_private_addresses,
            max_per_project: max_webhooks,
            max_in_flight: self.max_in_flight.max(1),
            max_in_flight_per_endpoint: self.max_in_flight_per_endpoint.max(1),
            max_in_flight_per_project: self.max_in_flight_per_project.max(1),
            round_gap: std::time::Duration::from_millis(self.round_gap_ms),
        }
    }
}

/// Bounces and complaints reported after an email left (API.md 27).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Feedback {
    /// The domain of every email's return path (`b-<token>@<domain>`); empty = off.
    pub return_path_domain: String,
    /// Where the receiving SMTP server listens (`0.0.0.0:25`); empty = off.
    pub smtp_listen: String,
    pub max_message_bytes: usize,
    pub max_connections: usize,
    pub smtp_timeout_seconds: u64,
    pub quarantine_days: u32,
    /// PEM files of the receiving server's certificate chain and key: STARTTLS when both
    /// are set.
    pub tls_cert: String,
    pub tls_key: String,
    /// The last part of every `Feedback-ID` header (campaign and workflow mail).
    pub sender_id: String,
    pub soft_bounce_limit: u32,
    pub soft_bounce_days: u32,
    pub soft_suppression_days: u32,
    /// How old a signed callback's timestamp may be (SendGrid, Mailgun): bounds a replay.
    pub max_signature_age_seconds: u64,
    pub postmark: PostmarkFeedback,
    pub sendgrid: SendgridFeedback,
    pub mailgun: MailgunFeedback,
    pub ses: SesFeedback,
}

/// `POST /feedback/ses`: on when a topic is listed.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SesFeedback {
    /// The SNS topics whose notifications are taken.
    pub topic_arns: Vec<String>,
    /// Hosts that may serve SNS's signing certificate (`*` stands for a region).
    pub cert_hosts: Vec<String>,
    /// The name the certificate is issued to.
    pub cert_subject: String,
    /// 2 refuses SHA-1 signatures.
    pub min_signature_version: u8,
    /// Extra roots (PEM) to trust when fetching it.
    pub ca_file: String,
}

/// `POST /feedback/postmark`: on when both are set.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PostmarkFeedback {
    pub username: String,
    pub password: String,
}

/// `POST /feedback/sendgrid`: on when the key is set.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SendgridFeedback {
    /// The Event Webhook's verification key, base64 as SendGrid shows it.
    pub public_key: String,
}

/// `POST /feedback/mailgun`: on when the key is set.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct MailgunFeedback {
    pub signing_key: String,
}

impl Settings {
    /// What each sender domain is told to publish: the SPF mechanism, and the CNAME of
    /// its return-path host when reports come back by mail.
    pub fn record_policy(&self) -> mailroom_actors::engine::config::RecordPolicy {
        mailroom_actors::engine::config::RecordPolicy::new(
            &self.domains.spf_include,
            self.feedback.return_path_domain(),
        )
    }
}

impl Feedback {
    /// The return path's domain, when one is set.
    pub fn return_path_domain(&self) -> Option<&str> {
        Some(self.return_path_domain.trim()).filter(|d| !d.is_empty())
    }

    /// Where the receiving SMTP server listens, when it is on; an error names a bad
    /// address, or a server without a return path to receive for.
    pub fn smtp_listen(&self) -> Result<Option<std::net::SocketAddr>, String> {
        let listen = self.smtp_listen.trim();
        if listen.is_empty() {
            return Ok(None);
        }
        let addr = listen.parse().map_err(|_| {
            format!(
                "feedback.smtp_listen = {listen:?} is not an address and port such as 0.0.0.0:25"
            )
        })?;
        if self.return_path_domain().is_none() {
            return Err(
                "feedback.smtp_listen is set but feedback.return_path_domain is not: \
                        the server would accept mail for no address (set the domain whose MX \
                        points here)"
                    .into(),
            );
        }
        Ok(Some(addr))
    }

    /// STARTTLS for the receiving server, when both files are set; an error names the
    /// file that cannot be used (or the one missing).
    pub fn tls(&self) -> Result<Option<mailroom_actors::engine::config::TlsAcceptor>, String> {
        match (self.tls_cert.trim(), self.tls_key.trim()) {
            ("", "") => Ok(None),
            ("", _) | (_, "") => Err(
                "feedback.tls_cert and feedback.tls_key go together: set both, or neither".into(),
            ),
            (cert, key) => mailroom_actors::engine::config::tls_acceptor(
                std::path::Path::new(cert),
                std::path::Path::new(key),
            )
            .map(Some),
        }
    }

    pub fn receiver(
        &self,
        hostname: &str,
        tls: Option<mailroom_actors::engine::config::TlsAcceptor>,
    ) -> mailroom_actors::engine::config::ReceiverConfig {
        mailroom_actors::engine::config::ReceiverConfig {
            tls,
            hostname: hostname.to_owned(),
            max_message_bytes: self.max_message_bytes.max(1024),
            max_connections: self.max_connections.max(1),
            timeout: std::time::Duration::from_secs(self.smtp_timeout_seconds.max(1)),
            quarantine_days: self.quarantine_days,
        }
    }

    pub fn engine(&self) -> mailroom_actors::engine::config::FeedbackConfig {
        mailroom_actors::engine::config::FeedbackConfig {
            soft_bounce_limit: self.soft_bounce_limit.max(1),
            soft_bounce_days: self.soft_bounce_days.max(1),
            soft_suppression_days: self.soft_suppression_days.max(1),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Workflows {
    pub allow_private_webhooks: bool,
    pub executors: usize,
    pub webhook_timeout_seconds: u64,
    pub max_history_entries: usize,
    pub max_finished_executions: u64,
    pub max_entries_per_day: u32,
}

impl Workflows {
    pub fn executor(&self) -> mailroom_actors::engine::config::ExecutorConfig {
        mailroom_actors::engine::config::ExecutorConfig {
            workers: self.executors.max(1),
            bounds: mailroom_actors::engine::config::WorkflowBounds {
                max_history: self.max_history_entries.max(1),
                max_finished: self.max_finished_executions.max(1),
            },
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Erasure {
    /// Records a contact's erasure handles per slice (`erasure::erase`).
    pub slice: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Tracking {
    pub enabled: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct LinkSettings {
    /// Days an unsubscribe link keeps working after its project's keys were rotated,
    /// counted from the day its email was sent.
    pub unsubscribe_valid_days: u32,
}

/// CAN-SPAM asks that an opt-out keep working for 30 days after the mail is sent.
pub const MIN_UNSUBSCRIBE_VALID_DAYS: u32 = 30;

impl LinkSettings {
    pub fn check(&self) -> Result<(), String> {
        if self.unsubscribe_valid_days < MIN_UNSUBSCRIBE_VALID_DAYS {
            return Err(format!(
                "links.unsubscribe_valid_days is {}; it must be at least \
                 {MIN_UNSUBSCRIBE_VALID_DAYS} (the law asks an unsubscribe link to work \
                 for 30 days after the mail was sent)",
                self.unsubscribe_valid_days
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Campaigns {
    /// A campaign whose own bounce (complaint) rate passes this, after `pause_after`
    /// emails the relay answered, stops as PAUSED.
    pub pause_bounce_rate: f64,
    pub pause_complaint_rate: f64,
    pub pause_after: u64,
    pub batch_size: usize,
    pub queue_ahead: u64,
    pub progress_log_seconds: u64,
    pub runners: usize,
}

impl Campaigns {
    pub fn runner(&self) -> mailroom_actors::engine::config::RunnerConfig {
        mailroom_actors::engine::config::RunnerConfig {
            batch_size: self.batch_size.clamp(1, 10_000),
            queue_ahead: self.queue_ahead.max(1),
            progress_every: std::time::Duration::from_secs(self.progress_log_seconds.max(1)),
            runners: self.runners.clamp(1, 64),
            pause: mailroom_actors::engine::config::PauseRule {
                bounce_rate: self.pause_bounce_rate,
                complaint_rate: self.pause_complaint_rate,
                after: self.pause_after.max(1),
            },
        }
    }
}

pub const MIN_ADMIN_TOKEN: usize = 32;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Admin {
    pub token: String,
}

impl Admin {
    /// The token, when the admin API is enabled.
    pub fn token(&self) -> Option<&str> {
        Some(self.token.as_str()).filter(|t| !t.is_empty())
    }

    /// A short token can be guessed: the admin API holds every project's keys.
    pub fn check(&self) -> Result<(), ShortAdminToken> {
        match self.token() {
            Some(t) if t.chars().count() < MIN_ADMIN_TOKEN => Err(ShortAdminToken {
                len: t.chars().count(),
            }),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "admin.token is {len} characters long; it must be at least {MIN_ADMIN_TOKEN} \
     (for example the output of `openssl rand -hex 32`), or empty to turn /admin off"
)]
pub struct ShortAdminToken {
    len: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct DashboardSettings {
    pub enabled: bool,
    pub session_minutes: u32,
    pub secure_cookie: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Metrics {
    pub enabled: bool,
    /// The least time between two scans of the outbox and the sending campaigns.
    pub scan_interval_ms: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Log {
    pub level: String,
    pub format: LogFormat,
    pub access: bool,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Control {
    pub enabled: bool,
    pub timeout_seconds: u64,
}

impl Settings {
    /// Where the file transport writes: `mail.file_dir`, else `<storage.path>/outbox`
    /// (so that moving the data directory moves the outbox with it).
    pub fn outbox_dir(&self) -> PathBuf {
        if self.mail.file_dir.as_os_str().is_empty() {
            self.storage.path.join("outbox")
        } else {
            self.mail.file_dir.clone()
        }
    }

    /// The running server's control socket, in its data directory.
    pub fn control_socket(&self) -> PathBuf {
        self.storage.path.join(CONTROL_SOCKET)
    }

    /// Loads the layers up to the environment; CLI flags are applied by the caller.
    pub fn load(file: Option<&Path>) -> Result<Settings, config::ConfigError> {
        let mut builder =
            Config::builder().add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml));
        if let Some(path) = file {
            builder = builder
                .add_source(File::new(&path.to_string_lossy(), FileFormat::Toml).required(true));
        }
        let config = builder
            .add_source(
                Environment::with_prefix("MAILROOM")
                    .prefix_separator("__")
                    .separator("__")
                    .list_separator(",")
                    .with_list_parse_key("dns.nameservers")
                    .with_list_parse_key("server.trusted_proxies")
                    .with_list_parse_key("webhooks.retry_seconds")
                    .try_parsing(true),
            )
            .build()?;
        let mut unknown = Vec::new();
        let settings: Settings =
            serde_ignored::deserialize(config, |path| unknown.push(path.to_string()))?;
        match unknown.first() {
            Some(key) => Err(config::ConfigError::Message(unknown_key(key))),
            None => Ok(settings),
        }
    }
}

/// A key no setting reads is almost always a typo, which would otherwise start the
/// server with the default in silence: refuse it, naming the key it was meant to be.
fn unknown_key(key: &str) -> String {
    let mut known = Vec::new();
    if let Ok(table) = DEFAULT_TOML.parse::<toml::Table>() {
        leaf_keys("", &table, &mut known);
    }
    let names: Vec<&str> = known.iter().map(String::as_str).collect();
    let hint = match mailroom_actors::engine::requests::meant(key, &names) {
        Some(meant) => format!("; did you mean `{meant}`?"),
        None => String::new(),
    };
    format!("unknown configuration key `{key}`{hint} (docs/configuration.md lists every key)")
}

fn leaf_keys(prefix: &str, table: &toml::Table, out: &mut Vec<String>) {
    for (name, value) in table {
        let path = format!("{prefix}{name}");
        match value {
            toml::Value::Table(inner) => leaf_keys(&format!("{path}."), inner, out),
            _ => out.push(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(toml: &str) -> Result<Settings, config::ConfigError> {
        Config::builder()
            .add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
            .add_source(File::from_str(toml, FileFormat::Toml))
            .build()?
            .try_deserialize()
    }

    #[test]
    fn a_misspelt_key_in_a_config_file_is_refused_naming_the_key_it_meant() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mailroom.toml");
        std::fs::write(&file, "[cluster]\nlease_second = 5\n").unwrap();
        let err = Settings::load(Some(&file)).unwrap_err().to_string();
        assert!(err.contains("`cluster.lease_second`"), "{err}");
        assert!(
            err.contains("did you mean `cluster.lease_seconds`"),
            "{err}"
        );
        std::fs::write(&file, "[cluster]\nlease_seconds = 5\n").unwrap();
        assert_eq!(
            Settings::load(Some(&file)).unwrap().cluster.lease_seconds,
            5
        );
    }

    #[test]
    fn an_unknown_storage_backend_is_refused_when_the_settings_load() {
        let err = with("[storage]\nbackend = \"mysql\"").unwrap_err();
        assert!(err.to_string().contains("mysql"), "{err}");
    }

    #[test]
    fn the_postgres_backend_without_a_url_is_refused_naming_the_key_to_set() {
        let s = with("[storage]\nbackend = \"postgres\"").unwrap();
        let err = s.storage.open().err().expect("no URL, no store");
        assert!(err.to_string().contains("storage.postgres.url"), "{err}");
    }

    #[test]
    fn embedded_defaults_match_the_documented_values() {
        let s = Settings::load(None).unwrap();
        assert_eq!((s.server.host.as_str(), s.server.port), ("127.0.0.1", 8080));
        assert_eq!(s.storage.path, PathBuf::from("./data"));
        assert_eq!(s.storage.backend, Backend::Sled);
        assert_eq!(s.storage.postgres.url, "");
        assert_eq!(s.storage.postgres.pool_size, 2);
        assert_eq!(s.storage.postgres.lock_wait_ms, 5000);
        assert_eq!(s.storage.postgres.statement_timeout_ms, 5000);
        assert_eq!(s.server.public_url(), None, "follows the listening address");
        assert_eq!(s.outbox_dir(), PathBuf::from("./data/outbox"));
        assert_eq!(s.control_socket(), PathBuf::from("./data/mailroom.sock"));
        assert_eq!(s.log.format, LogFormat::Text);
        assert!(!s.log.access);
        assert!(s.control.enabled);
        assert_eq!(s.mail.transport, MailTransport::File);
        assert_eq!(s.smtp.tls, SmtpTls::None);
        assert!(s.smtp.tls_ca_file().is_none());
        assert_eq!(
            s.smtp.tls_server_name(),
            "127.0.0.1",
            "defaults to smtp.host"
        );
        assert_eq!(s.sending.rate_per_second, 14);
        assert_eq!(s.limits.requests_per_minute, 1000);
        assert_eq!(s.limits.max_body_bytes, 15_728_640);
        assert_eq!(s.limits.max_import_bytes, 52_428_800);
        assert_eq!(s.limits.import_slice_rows, 1000);
        assert_eq!(s.limits.max_running_imports, 4);
        assert_eq!(s.dns.timeout_ms, 2000);
        assert_eq!(s.domains.recheck_seconds, 300);
        assert_eq!(s.domains.spf_include, "include:_spf.mailroom.local");
        assert!(s.admin.token().is_none());
        assert_eq!(s.cluster.node_id, "");
        assert_eq!(s.cluster.advertise_url, "");
        assert_eq!(s.cluster.secret, "");
        assert_eq!(s.cluster.lease_seconds, 10);
        assert_eq!(s.cluster.forward_timeout_seconds, 30);
    }

    #[test]
    fn an_empty_outbox_follows_the_data_directory_and_a_set_one_stays() {
        let mut s = Settings::load(None).unwrap();
        s.storage.path = PathBuf::from("/srv/mail");
        assert_eq!(s.outbox_dir(), PathBuf::from("/srv/mail/outbox"));
        s.mail.file_dir = PathBuf::from("/var/spool/out");
        assert_eq!(s.outbox_dir(), PathBuf::from("/var/spool/out"));
    }

    #[test]
    fn a_public_url_loses_its_trailing_slash() {
        let mut s = Settings::load(None).unwrap();
        s.server.public_url = " https://mail.example.com/ ".into();
        assert_eq!(s.server.public_url(), Some("https://mail.example.com"));
    }
}
