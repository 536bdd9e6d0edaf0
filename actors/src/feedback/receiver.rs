//! The receiving SMTP server of `feedback.smtp_listen`: where delivery reports and
//! complaints mailed to a return path (`b-<token>@<return_path_domain>`) arrive.
//!
//! It takes RCPT only for a valid token (550 otherwise: a forged or foreign address
//! never reaches the parser), at most `max_message_bytes` (552 past it), lines of at most
//! `MAX_LINE` bytes, `max_connections` at once (421 past it) and `timeout` per command.
//! A message is answered 250 only once what it says is durable: its reports applied
//! (`effects::apply`), or, when it cannot be read, kept in quarantine; a failure to
//! write answers 451 and the sending MTA tries again later. Mail that is no report (an
//! auto-reply) is counted and dropped. With `feedback.tls_cert` and `feedback.tls_key`
//! it offers STARTTLS (RFC 3207); without, reports travel as the MTA sends them.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub use tokio_rustls::TlsAcceptor;

use super::effects::{self, Applied};
use super::reports::{self, Read};
use super::FeedbackConfig;
use crate::mailer::return_path::ReturnPath;
use crate::model::{EmailId, ProjectId};
use crate::project::registry::Registry;

/// A command line's longest, and a message line's (RFC 5321 says 1000 with CRLF; some
/// senders go past it in the body, so the body gets more room).
const MAX_LINE: usize = 1000;
const MAX_DATA_LINE: usize = 8192;
/// Recipients one message may name.
const MAX_RCPT: usize = 10;
/// Commands one session may send; a session also ends after ten times the command
/// timeout (`feedback.smtp_timeout_seconds`).
const MAX_COMMANDS: usize = 5000;

#[derive(Clone)]
pub struct ReceiverConfig {
    pub hostname: String,
    pub max_message_bytes: usize,
    pub max_connections: usize,
    pub timeout: Duration,
    /// Days an unreadable report is kept.
    pub quarantine_days: u32,
    /// STARTTLS, when `feedback.tls_cert` and `feedback.tls_key` are set.
    pub tls: Option<TlsAcceptor>,
}

/// The STARTTLS acceptor of a certificate chain and its key, both PEM files; an error
/// names the file and what is wrong with it.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("feedback.tls_cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "feedback.tls_cert {}: no certificate in it",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("feedback.tls_key {}: {e}", key.display()))?;
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("the feedback server's TLS: {e}"))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| format!("feedback.tls_cert and feedback.tls_key do not make a pair: {e}"))?;
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

struct Shared {
    registry: Registry,
    return_path: Arc<ReturnPath>,
    feedback: FeedbackConfig,
    config: ReceiverConfig,
}

/// Serves `listener` until the engine stops: one task per connection, each bounded.
pub fn start(
    listener: TcpListener,
    registry: Registry,
    return_path: Arc<ReturnPath>,
    feedback: FeedbackConfig,
    config: ReceiverConfig,
) {
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    purge_every_hour(registry.clone(), config.quarantine_days);
    let shared = Arc::new(Shared {
        registry,
        return_path,
        feedback,
        config,
    });
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = shared.registry.drain().stopped() => return,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, say: wait a little rather than spin.
                    tracing::warn!(error = %e, "the feedback SMTP server could not accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let shared = shared.clone();
            match slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    tokio::spawn(async move {
                        let _slot = slot;
                        if let Err(e) = session(stream, &shared).await {
                            tracing::debug!(%peer, error = %e, "a feedback SMTP session ended");
                        }
                    });
                }
                Err(_) => {
                    tokio::spawn(async move {
                        let mut stream = stream;
                        let _ = stream
                            .write_all(b"421 4.3.2 Too many connections, try again later\r\n")
                            .await;
                    });
                }
            }
        }
    });
}

/// Once an hour, drops the quarantined reports older than `days` of the projects this
/// node owns.
fn purge_every_hour(registry: Registry, days: u32) {
    tokio::spawn(async move {
        loop {
            let now = crate::model::Timestamp::from(registry.clock().now()).millis();
            let before = now - days.max(1) as i64 * 86_400_000;
            let projects = crate::directory::Projects::new(registry.store().clone()).list();
            for p in projects.unwrap_or_default() {
                if !registry.ownership().owns(p.id) {
                    continue;
                }
                match effects::purge_quarantine(&registry, p.id, before).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(project = %p.id, removed = n, "quarantined reports past feedback.quarantine_days")
                    }
                    Err(e) => {
                        tracing::warn!(project = %p.id, error = %e, "purging quarantined reports")
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
                _ = registry.drain().stopped() => return,
            }
        }
    });
}

enum Line {
    Text(String),
    TooLong,
    Eof,
}

async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
    timeout: Duration,
) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let read = tokio::time::timeout(
        timeout,
        AsyncReadExt::take(&mut *r, max as u64 + 1).read_until(b'\n', &mut buf),
    )
    .await;
    let n = match read {
        Ok(n) => n?,
        Err(_) => return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle")),
    };
    if n == 0 {
        return Ok(Line::Eof);
    }
    if !buf.ends_with(b"\n") {
        // The rest of a long line is not read here: a command session closes, and the
        // message's reader reads on in bounded pieces it throws away.
        if buf.len() > max {
            return Ok(Line::TooLong);
        }
        return Ok(Line::Eof);
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(Line::Text(String::from_utf8_lossy(&buf).into_owned()))
}

/// One write per reply: two small ones would wait on the peer's delayed ACK (Nagle),
/// 40 ms a reply.
async fn reply<W: AsyncWrite + Unpin>(w: &mut W, text: &str) -> std::io::Result<()> {
    w.write_all(format!("{text}\r\n").as_bytes()).await?;
    w.flush().await
}

/// The address inside `FROM:<...>` / `TO:<...>`, and the parameters after it.
fn path_of(arg: &str) -> Option<(&str, &str)> {
    let open = arg.find('<')?;
    let close = arg[open..].find('>')? + open;
    Some((arg[open + 1..close].trim(), arg[close + 1..].trim()))
}

async fn session(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let host = shared.config.hostname.as_str();
    let mut stream = stream;
    stream
        .write_all(format!("220 {host} Mailroom feedback ESMTP\r\n").as_bytes())
        .await?;
    if let Some(plain) = commands(stream, shared, false).await? {
        // STARTTLS: the same session, encrypted; the client says EHLO again.
        let Some(acceptor) = shared.config.tls.clone() else {
            return Ok(());
        };
        let tls = tokio::time::timeout(shared.config.timeout, acceptor.accept(plain))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake"))??;
        commands(tls, shared, true).await?;
    }
    Ok(())
}

/// The commands of a session, on `stream` (plain, or TLS once `tls`); answers the plain
/// stream back when the client asked for STARTTLS.
async fn commands<S>(stream: S, shared: &Shared, tls: bool) -> std::io::Result<Option<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (read, mut write) = tokio::io::split(stream);
    let mut read = BufReader::new(read);
    let (timeout, host) = (shared.config.timeout, shared.config.hostname.as_str());
    let mut mail_from = false;
    let mut rcpts: Vec<EmailId> = Vec::new();
    // A session that trickles (a NOOP a minute, a line of DATA a minute) ends anyway.
    let (started, session_limit) = (std::time::Instant::now(), timeout * 10);
    let mut commands = 0usize;
    loop {
        let line = match read_line(&mut read, MAX_LINE, timeout).await? {
            Line::Eof => return Ok(None),
            Line::TooLong => {
                reply(&mut write, "500 5.5.2 Line too long; closing").await?;
                return Ok(None);
            }
            Line::Text(t) => t,
        };
        commands += 1;
        if commands > MAX_COMMANDS || started.elapsed() > session_limit {
            reply(&mut write, "421 4.4.2 Session too long; closing").await?;
            return Ok(None);
        }
        let (verb, arg) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match verb.to_ascii_uppercase().as_str() {
            "EHLO" => {
                let max = shared.config.max_message_bytes;
                let starttls = if shared.config.tls.is_some() && !tls {
                    "\r\n250-STARTTLS"
                } else {
                    ""
                };
                reply(
                    &mut write,
                    &format!(
                        "250-{host}\r\n250-SIZE {max}\r\n250-8BITMIME{starttls}\r\n250 ENHANCEDSTATUSCODES"
                    ),
                )
                .await?;
            }
            "HELO" => reply(&mut write, &format!("250 {host}")).await?,
            "MAIL" => {
                let Some((_, params)) = arg.strip_prefix_ci("FROM:").and_then(path_of) else {
                    reply(&mut write, "501 5.5.4 Syntax: MAIL FROM:<address>").await?;
                    continue;
                };
                let size = params
                    .split_whitespace()
                    .find_map(|p| p.strip_prefix_ci("SIZE="))
                    .and_then(|s| s.parse::<usize>().ok());
                if size.is_some_and(|s| s > shared.config.max_message_bytes) {
                    reply(&mut write, "552 5.3.4 Message too big").await?;
                    continue;
                }
                mail_from = true;
                rcpts.clear();
                reply(&mut write, "250 2.1.0 OK").await?;
            }
            "RCPT" => {
                if !mail_from {
                    reply(&mut write, "503 5.5.1 MAIL first").await?;
                    continue;
                }
                let Some((to, _)) = arg.strip_prefix_ci("TO:").and_then(path_of) else {
                    reply(&mut write, "501 5.5.4 Syntax: RCPT TO:<address>").await?;
                    continue;
                };
                match shared.return_path.open(to) {
                    Some(_) if rcpts.len() >= MAX_RCPT => {
                        reply(&mut write, "452 4.5.3 Too many recipients").await?
                    }
                    Some(id) => {
                        rcpts.push(id);
                        reply(&mut write, "250 2.1.5 OK").await?;
                    }
                    None => reply(&mut write, "550 5.1.1 No such recipient here").await?,
                }
            }
            "DATA" => {
                if rcpts.is_empty() {
                    reply(&mut write, "503 5.5.1 RCPT first").await?;
                    continue;
                }
                reply(&mut write, "354 End data with <CR><LF>.<CR><LF>").await?;
                let message =
                    read_data(&mut read, shared.config.max_message_bytes, timeout).await?;
                let answer = match message {
                    None => "552 5.3.4 Message too big".to_owned(),
                    Some(m) => take(shared, &rcpts, m).await,
                };
                mail_from = false;
                rcpts.clear();
                reply(&mut write, &answer).await?;
            }
            "STARTTLS" if shared.config.tls.is_some() && !tls => {
                // Nothing may follow the command before the handshake (RFC 3207).
                if !read.buffer().is_empty() {
                    reply(&mut write, "501 5.5.4 Nothing may follow STARTTLS").await?;
                    return Ok(None);
                }
                reply(&mut write, "220 2.0.0 Ready to start TLS").await?;
                return Ok(Some(read.into_inner().unsplit(write)));
            }
            "RSET" => {
                mail_from = false;
                rcpts.clear();
                reply(&mut write, "250 2.0.0 OK").await?;
            }
            "NOOP" => reply(&mut write, "250 2.0.0 OK").await?,
            "VRFY" => reply(&mut write, "252 2.5.2 Cannot verify").await?,
            "QUIT" => {
                reply(&mut write, "221 2.0.0 Bye").await?;
                return Ok(None);
            }
            _ => reply(&mut write, "502 5.5.2 Command not recognized").await?,
        }
    }
}

trait StripCi {
    fn strip_prefix_ci(&self, prefix: &str) -> Option<&str>;
}

impl StripCi for str {
    fn strip_prefix_ci(&self, prefix: &str) -> Option<&str> {
        let head = self.get(..prefix.len())?;
        head.eq_ignore_ascii_case(prefix)
            .then(|| &self[prefix.len()..])
    }
}

/// The message up to the lone `.`, dot-unstuffed; None when it passed `max` bytes (the
/// rest is still read, so the session can go on).
async fn read_data<R: AsyncRead + AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
    timeout: Duration,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    let mut over = false;
    let deadline = std::time::Instant::now() + timeout * 10;
    loop {
        if std::time::Instant::now() > deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "DATA took too long",
            ));
        }
        let line = match read_line(r, MAX_DATA_LINE, timeout).await? {
            Line::Eof => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "in DATA",
                ))
            }
            Line::TooLong => {
                over = true;
                continue;
            }
            Line::Text(t) => t,
        };
        if line == "." {
            return Ok((!over).then_some(out));
        }
        let line = line.strip_prefix('.').unwrap_or(&line);
        if out.len() + line.len() + 2 > max {
            over = true;
            out.clear();
        }
        if !over {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// What a received message does, and the reply that says so.
async fn take(shared: &Shared, rcpts: &[EmailId], message: Vec<u8>) -> String {
    // The first token that names an email here decides the project.
    let mut target: Option<(ProjectId, EmailId)> = None;
    for id in rcpts {
        let registry = shared.registry.clone();
        let id = *id;
        let found =
            tokio::task::spawn_blocking(move || effects::project_of_email(&registry, id)).await;
        match found {
            Ok(Ok(Some(p))) => {
                target = Some((p, id));
                break;
            }
            Ok(Ok(None)) => {}
            // The store could not say: the MTA tries again, nothing is lost.
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "finding a report's email");
                return "451 4.3.0 Try again later".to_owned();
            }
            Err(_) => return "451 4.3.0 Try again later".to_owned(),
        }
    }
    let Some((p, email)) = target else {
        // The email is gone (erased, or its project deleted): nothing to apply it to.
        return "250 2.0.0 OK: no such email any more; dropped".to_owned();
    };
    let registry = &shared.registry;
    match reports::read(&message) {
        Read::Other => {
            registry.metrics().feedback_other.add(1);
            "250 2.0.0 OK: not a report; dropped".to_owned()
        }
        Read::Unreadable(why) => {
            tracing::info!(project = %p, email = %email, why, "a report that cannot be read; quarantined");
            match effects::quarantine(registry, p, email, message).await {
                Ok(true) => "250 2.0.0 OK: kept for review".to_owned(),
                Ok(false) => "250 2.0.0 OK: this email has a report kept already".to_owned(),
                Err(e) => {
                    tracing::warn!(error = %e, "quarantining a report");
                    "451 4.3.0 Try again later".to_owned()
                }
            }
        }
        Read::Reports(list) => {
            let mut done = 0;
            for report in list {
                match effects::apply(registry, &shared.feedback, p, Some(email), report).await {
                    Ok(Applied::Done | Applied::Duplicate | Applied::Unmatched) => done += 1,
                    Err(e) => {
                        tracing::warn!(project = %p, error = %e, "applying a delivery report");
                        return "451 4.3.0 Try again later".to_owned();
                    }
                }
            }
            format!("250 2.0.0 OK: {done} report(s)")
        }
    }
}
