//! The settings a test server runs with, typed: the server's own `Settings`, loaded from
//! its embedded defaults and `config/test.toml`, changed by the test
//! (`TestApp::spawn_with(|s| s.limits.max_contacts = 2)`), and written to a file that the
//! binary reads with `--config`. A misspelt or mistyped setting does not compile.

use std::path::Path;

pub use mailroom::config::{LogFormat, MailTransport, Settings, SmtpTls};

use super::app::test_config;

/// The test settings, before a test changes them.
pub fn base() -> Settings {
    Settings::load(Some(&test_config())).expect("config/test.toml loads")
}

/// Writes to `file` the settings of a server on `data_dir`, as `configure` leaves them.
pub fn write(file: &Path, data_dir: &Path, configure: impl FnOnce(&mut Settings)) {
    let mut s = base();
    s.storage.path = data_dir.to_owned();
    s.mail.file_dir = data_dir.join("outbox");
    configure(&mut s);
    let text = toml::to_string(&s).expect("settings serialize as TOML");
    std::fs::write(file, text).expect("write the test settings");
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
