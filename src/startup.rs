//! A start that explains itself: one summary of what this server is and where its mail
//! and links go, and a background check that a configured public URL reaches it.

use std::sync::Arc;
use std::time::Duration;

use mailroom_actors::engine::feedback::{Resolver, WebhookClient};

use crate::config::{MailTransport, Settings};
use crate::listen::LinksUrl;

/// The command a fresh install needs next.
pub const FIRST_PROJECT: &str = "mailroom project create --name \"My app\"";

/// Where outgoing mail goes, in a few words.
pub fn mail_destination(settings: &Settings) -> String {
    match settings.mail.transport {
        MailTransport::File => format!("file {}", settings.outbox_dir().display()),
        MailTransport::Smtp => {
            let s = &settings.smtp;
            let tls = match s.tls {
                crate::config::SmtpTls::None => "no TLS",
                crate::config::SmtpTls::Starttls => "STARTTLS",
                crate::config::SmtpTls::Tls => "TLS",
            };
            format!("smtp {}:{} ({tls})", s.host, s.port)
        }
    }
}

/// One event: version, data directory, mail, the URL in emails and the projects; with
/// no project yet, the command that makes the first.
pub fn log_summary(settings: &Settings, links: &LinksUrl, projects: usize) {
    let links_from = if links.derived {
        "the listening address (server.public_url is unset)"
    } else {
        "server.public_url"
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        data_dir = %settings.storage.path.display(),
        backend = ?settings.storage.backend,
        mail = %mail_destination(settings),
        links = %links.url,
        links_from,
        projects,
        "mailroom ready"
    );
    if projects == 0 {
        tracing::info!(
            command = FIRST_PROJECT,
            "no projects yet; make the first with the command (it works while the server runs)"
        );
    }
    if links.from_wildcard {
        tracing::warn!(
            links = %links.url,
            "the server listens on every address but links in emails point at this \
             machine's loopback; set server.public_url to the URL recipients reach"
        );
    }
}

/// Asks `{url}/health` once, off the start-up path; no answer, or another server's, is a
/// warning: every link of every email would be dead.
pub fn check_public_url(url: String, timeout_ms: u64, resolver: Arc<Resolver>) {
    if timeout_ms == 0 {
        return;
    }
    let timeout = Duration::from_millis(timeout_ms);
    actix_web::rt::spawn(async move {
        let client = WebhookClient::new(resolver, true, timeout);
        let health = format!("{url}/health");
        match client.call(&health, "GET", &[], Vec::new()).await {
            Ok(200) => tracing::info!(url = %health, "server.public_url answers"),
            Ok(status) => tracing::warn!(
                url = %health,
                status,
                "server.public_url does not reach this server; links in emails may be dead"
            ),
            Err(e) => tracing::warn!(
                url = %health,
                error = %mailroom_actors::error::chain(&e),
                "server.public_url does not answer; links in emails may be dead"
            ),
        }
    });
}
