//! The settings a test server runs with, typed: the server's own `Settings`, loaded from
//! its embedded defaults and `config/test.toml`, changed by the test
//! (`TestApp::spawn_with(|s| s.limits.max_contacts = 2)`), and written to a file that the
//! binary reads with `--config`. A misspelt or mistyped setting does not compile.

use std::ops::{Deref, DerefMut};
use std::path::Path;

pub use mailroom::config::{Backend, LogFormat, MailTransport, PostgresTls, Settings, SmtpTls};

use super::app::test_config;

/// The test settings, before a test changes them.
pub fn base() -> Settings {
    Settings::load(Some(&test_config())).expect("config/test.toml loads")
}

/// What a test sets up for its server: the server's settings (a `Setup` derefs to them,
/// so `|s| s.limits.max_contacts = 2` reads as plain settings), and the faults that a
/// debug build injects (not settings: an operator has no such key).
pub struct Setup {
    settings: Settings,
    panic_once: Vec<&'static str>,
}

impl Setup {
    /// Arms the engine's fault hook (`actors/src/faults.rs`): the server panics once at
    /// `point` (`workflow_step`, `campaign_batch`, `dispatcher_round`, `mailer_send`,
    /// `mailer_transaction`, `scheduler_fire`, `project_write`; see `Point`).
    pub fn panic_once(&mut self, point: &'static str) {
        self.panic_once.push(point);
    }
}

impl Deref for Setup {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.settings
    }
}

impl DerefMut for Setup {
    fn deref_mut(&mut self) -> &mut Settings {
        &mut self.settings
    }
}

/// Writes to `file` the settings of a server on `data_dir`, as `configure` leaves them,
/// and answers the environment the server process needs besides (the armed faults).
pub fn write(
    file: &Path,
    data_dir: &Path,
    configure: impl FnOnce(&mut Setup),
) -> Vec<(String, String)> {
    let mut s = Setup {
        settings: base(),
        panic_once: Vec::new(),
    };
    s.storage.path = data_dir.to_owned();
    s.mail.file_dir = data_dir.join("outbox");
    if let Some(url) = super::postgres::schema_url(data_dir) {
        s.storage.backend = Backend::Postgres;
        s.storage.postgres.url = url;
        // A node's id follows its data directory, not its port (0, a new one at each
        // start): a restarted server is the same node and takes its leases back at once,
        // as one restarted on its fixed port does.
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        data_dir.hash(&mut h);
        s.cluster.node_id = format!("test-{:016x}", h.finish());
    }
    configure(&mut s);
    let text = toml::to_string(&s.settings).expect("settings serialize as TOML");
    std::fs::write(file, text).expect("write the test settings");
    let mut env = Vec::new();
    if !s.panic_once.is_empty() {
        env.push((
            "MAILROOM_FAULT_PANIC_ONCE".to_owned(),
            s.panic_once.join(","),
        ));
    }
    env
}

/// A server that sends through the SMTP server on loopback at `port`, unpaced, retrying
/// quickly, with no request limit: what most delivery tests start from.
pub fn smtp_relay(s: &mut Settings, port: u16) {
    s.mail.transport = MailTransport::Smtp;
    s.smtp.host = "127.0.0.1".into();
    s.smtp.port = port;
    s.sending.rate_per_second = 0;
    s.sending.retry_base_ms = 50;
    s.smtp.timeout_ms = 2000;
    s.limits.requests_per_minute = 0;
}
