//! SMTP connections with TCP_NODELAY. lettre's pooled transport opens its sockets
//! without it, and on loopback Nagle's algorithm against delayed ACKs stalls every
//! message for about 40 ms (one connection then tops out near 45 emails/s). Here the
//! socket is ours: we connect, set the option, and hand the stream to lettre's
//! `AsyncSmtpConnection`, keeping idle connections for reuse. TLS (`tls.rs`) is laid
//! over that same socket, so every mode keeps TCP_NODELAY.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, AsyncTokioStream};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt, Rset};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use lettre::transport::smtp::response::{Code, Severity};
use tokio::net::TcpStream;

use super::messages::{Delivery, Owner};
use super::tls::{SmtpSecurity, TlsStream};
use crate::faults::{Faults, Point};
use crate::metrics::{Metrics, RelayFault};

pub struct SmtpPool {
    host: String,
    port: u16,
    security: SmtpSecurity,
    credentials: Option<Credentials>,
    timeout: Duration,
    max_idle: usize,
    idle: Mutex<Vec<AsyncSmtpConnection>>,
    hello: ClientId,
    /// Where relay faults are counted, by class.
    metrics: Arc<Metrics>,
    /// Test faults (debug builds only).
    faults: Arc<Faults>,
}

impl SmtpPool {
    pub fn new(
        host: String,
        port: u16,
        security: SmtpSecurity,
        credentials: Option<(String, String)>,
        max_idle: usize,
        timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        SmtpPool {
            host,
            port,
            security,
            credentials: credentials.map(|(u, p)| Credentials::new(u, p)),
            timeout,
            max_idle: max_idle.max(1),
            idle: Mutex::new(Vec::new()),
            hello: ClientId::Domain("mailroom.localhost".into()),
            metrics,
            faults: Arc::default(),
        }
    }

    /// The engine's test faults (debug builds only).
    pub fn with_faults(mut self, faults: Arc<Faults>) -> Self {
        self.faults = faults;
        self
    }

    /// A connection ready for MAIL FROM; a failure is counted by its class.
    async fn connect(&self) -> Result<AsyncSmtpConnection, Delivery> {
        let fail = |class: RelayFault, e: String| {
            self.fault(
                class,
                Delivery::Transient(format!("connecting to {}:{}: {e}", self.host, self.port)),
            )
        };
        let stream = tokio::time::timeout(
            self.timeout,
            TcpStream::connect((self.host.as_str(), self.port)),
        )
        .await
        .map_err(|_| fail(RelayFault::Timeout, "timed out".into()))?
        .map_err(|e| fail(RelayFault::Connect, e.to_string()))?;
        stream
            .set_nodelay(true)
            .map_err(|e| fail(RelayFault::Connect, e.to_string()))?;
        let stream: Box<dyn AsyncTokioStream> = match &self.security {
            SmtpSecurity::Implicit {
                connector,
                server_name,
            } => {
                let tls = tokio::time::timeout(
                    self.timeout,
                    connector.connect(server_name.clone(), stream),
                )
                .await
                .map_err(|_| fail(RelayFault::Timeout, "TLS handshake timed out".into()))?
                .map_err(|e| fail(RelayFault::Tls, format!("TLS handshake: {e}")))?;
                Box::new(TlsStream(tls))
            }
            _ => Box::new(stream),
        };
        let mut conn = tokio::time::timeout(
            self.timeout,
            AsyncSmtpConnection::connect_with_transport(stream, &self.hello),
        )
        .await
        .map_err(|_| fail(RelayFault::Timeout, "greeting timed out".into()))?
        .map_err(|e| fail(refusal_class(&e, RelayFault::Connect), e.to_string()))?;
        if let SmtpSecurity::StartTls(params) = &self.security {
            if !conn.server_info().supports_feature(Extension::StartTls) {
                // Never fall back to clear text: smtp.tls = "starttls" is a promise.
                let _ = tokio::time::timeout(self.timeout, conn.abort()).await;
                return Err(fail(
                    RelayFault::Tls,
                    "the server does not offer STARTTLS (smtp.tls = \"starttls\"); \
                     nothing was sent in clear"
                        .into(),
                ));
            }
            tokio::time::timeout(self.timeout, conn.starttls(params.clone(), &self.hello))
                .await
                .map_err(|_| fail(RelayFault::Timeout, "STARTTLS timed out".into()))?
                .map_err(|e| fail(RelayFault::Tls, format!("STARTTLS: {e}")))?;
        }
        if let Some(c) = &self.credentials {
            // A refused login is the relay's fault or ours, never the recipient's: the
            // email waits and is retried (a bounce would unsubscribe the contact).
            tokio::time::timeout(
                self.timeout,
                conn.auth(&[Mechanism::Plain, Mechanism::Login], c),
            )
                .await
                .map_err(|_| fail(RelayFault::Timeout, "SMTP AUTH timed out".into()))?
                .map_err(|e| {
                    tracing::error!(error = %e, "the relay refused our SMTP login; check smtp.username and smtp.password");
                    self.fault(RelayFault::Auth, Delivery::RelayFault(format!("relay authentication failed: {e}")))
                })?;
        }
        Ok(conn)
    }

    fn take(&self) -> Option<AsyncSmtpConnection> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn give_back(&self, conn: AsyncSmtpConnection) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle && !conn.has_broken() {
            idle.push(conn);
        }
    }

    /// One attempt: an idle connection (or a new one), MAIL/RCPT/DATA, and back to the pool.
    /// `owner` is asked once the connection is ready, right before MAIL FROM: a relay
    /// slow to greet may hold us past the project's lease, and then nothing is sent.
    pub async fn send(&self, envelope: &Envelope, bytes: &[u8], owner: &Owner) -> Delivery {
        let reused = self.take();
        let was_reused = reused.is_some();
        let mut conn = match reused {
            Some(c) => c,
            None => match self.connect().await {
                Ok(c) => c,
                Err(d) => return d,
            },
        };
        if !owner.begin() {
            // Nothing of this email went out: the connection is as clean as it came.
            self.give_back(conn);
            return Delivery::NotOwned;
        }
        self.faults.hit(Point::MailerTransaction);
        match tokio::time::timeout(self.timeout, transaction(&mut conn, envelope, bytes)).await {
            Ok(Ok(())) => {
                self.give_back(conn);
                Delivery::Sent
            }
            Ok(Err(Stop::Client(why))) => {
                self.give_back(conn);
                self.fault(RelayFault::Other, Delivery::Transient(why))
            }
            Ok(Err(Stop::Reply(stage, e))) => {
                let answered = e.is_permanent() || e.is_transient();
                if answered && !conn.has_broken() {
                    // A refusal leaves the connection usable once the transaction is reset.
                    let reset = tokio::time::timeout(self.timeout, conn.command(Rset)).await;
                    if reset.is_ok_and(|r| r.is_ok()) {
                        self.give_back(conn);
                    }
                } else if was_reused && !answered && stage == Stage::MailFrom {
                    // A pooled connection the server closed meanwhile (it failed at the
                    // first command, so nothing of this email went out): one fresh try.
                    owner.not_begun();
                    return Box::pin(self.send(envelope, bytes, owner)).await;
                }
                self.classify(stage, &e)
            }
            Err(_) => self.fault(
                RelayFault::Timeout,
                Delivery::Transient("SMTP transaction timed out".into()),
            ),
        }
    }

    /// Counts a fault of `class` and answers `d`.
    fn fault(&self, class: RelayFault, d: Delivery) -> Delivery {
        self.metrics.relay_fault(class);
        d
    }

    /// What a reply at `stage` means for the email. Every outcome but the recipient's
    /// own answer (accepted, or refused for good) is counted as a relay fault.
    fn classify(&self, stage: Stage, e: &lettre::transport::smtp::Error) -> Delivery {
        let Some(r) = Refusal::of(e) else {
            // No reply: the connection broke, or the reply did not parse.
            return self.fault(RelayFault::Other, Delivery::Transient(e.to_string()));
        };
        if !r.is_permanent() {
            return self.fault(RelayFault::Refused4xx, Delivery::Transient(r.text));
        }
        let refused = |d| self.fault(RelayFault::Refused5xx, d);
        let text = &r.text;
        match stage {
            // Relays often refuse a relay, a sender or a policy at RCPT TO (Postfix delays
            // every refusal to it): that is the relay's verdict on us, not on the address.
            Stage::RcptTo if r.status.is_some_and(EnhancedStatus::is_about_us) => refused(
                Delivery::RelayFault(format!("the relay refused us at RCPT TO: {text}")),
            ),
            Stage::RcptTo => Delivery::Permanent(r.text),
            Stage::Message if r.status.is_some_and(EnhancedStatus::is_about_recipient) => {
                Delivery::Permanent(r.text)
            }
            Stage::Message => refused(Delivery::Failed(format!(
                "the relay refused this message: {text}"
            ))),
            Stage::MailFrom => refused(Delivery::RelayFault(format!(
                "the relay refused our sender (MAIL FROM): {text}"
            ))),
            Stage::Data => refused(Delivery::RelayFault(format!(
                "the relay refused DATA: {text}"
            ))),
        }
    }
}

/// A relay's negative reply: lettre's reply code, and the enhanced status that opens
/// the reply's own text (lettre keeps that text as the error's source).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    code: Code,
    status: Option<EnhancedStatus>,
    /// The whole error as shown in `lastError` and the log, e.g.
    /// "permanent error (550): 5.1.1 No such user".
    text: String,
}

impl Refusal {
    /// The refusal in `e`, when the relay answered 4xx or 5xx.
    fn of(e: &lettre::transport::smtp::Error) -> Option<Refusal> {
        let code = e.status()?;
        let reply = std::error::Error::source(e).map(ToString::to_string);
        Some(Refusal {
            code,
            status: reply.as_deref().and_then(EnhancedStatus::opening),
            text: e.to_string(),
        })
    }

    fn is_permanent(&self) -> bool {
        self.code.severity == Severity::PermanentNegativeCompletion
    }
}

/// An enhanced mail system status code (RFC 3463), such as 5.1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EnhancedStatus {
    class: u8,
    subject: u16,
    detail: u16,
}

impl EnhancedStatus {
    /// The status that opens a reply's text, as in "5.1.1 No such user".
    fn opening(reply: &str) -> Option<EnhancedStatus> {
        let word = reply.split_whitespace().next()?;
        let mut parts = word.split('.');
        let class = parts.next()?.parse().ok()?;
        let subject = parts.next()?.parse().ok()?;
        let detail = parts.next()?.parse().ok()?;
        match parts.next() {
            None if matches!(class, 2 | 4 | 5) => Some(EnhancedStatus {
                class,
                subject,
                detail,
            }),
            _ => None,
        }
    }

    /// 5.1.x (addressing) and 5.2.x (mailbox) describe the recipient, except a bad
    /// sender (5.1.7, 5.1.8) and a message too large for the system (5.2.3).
    fn is_about_recipient(self) -> bool {
        match (self.class, self.subject, self.detail) {
            (5, 1, d) => d != 7 && d != 8,
            (5, 2, d) => d != 3,
            _ => false,
        }
    }

    /// Security and policy (5.7.x) and a bad sender (5.1.7, 5.1.8) describe us.
    fn is_about_us(self) -> bool {
        matches!(
            (self.class, self.subject, self.detail),
            (5, 7, _) | (5, 1, 7) | (5, 1, 8)
        )
    }
}

/// Where in a transaction the relay answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    MailFrom,
    RcptTo,
    Data,
    Message,
}

/// Why a transaction stopped: a reply at a step, or something we refused to send.
enum Stop {
    Reply(Stage, lettre::transport::smtp::Error),
    /// Nothing was sent that the relay could judge (lettre's own checks, kept).
    Client(String),
}

/// MAIL FROM, RCPT TO, DATA and the message, as lettre's `send` does them, but saying
/// which step a refusal answered: only the recipient's refusal is a bounce.
async fn transaction(
    conn: &mut AsyncSmtpConnection,
    envelope: &Envelope,
    bytes: &[u8],
) -> Result<(), Stop> {
    let mut params = Vec::new();
    let ascii = |a: &lettre::Address| AsRef::<str>::as_ref(a).is_ascii();
    if !envelope.from().is_none_or(ascii) || !envelope.to().iter().all(ascii) {
        if !conn.server_info().supports_feature(Extension::SmtpUtfEight) {
            return Err(Stop::Client(
                "an address is not ASCII and the relay does not offer SMTPUTF8".into(),
            ));
        }
        params.push(MailParameter::SmtpUtfEight);
    }
    if !bytes.is_ascii() {
        if !conn.server_info().supports_feature(Extension::EightBitMime) {
            return Err(Stop::Client(
                "the message is not ASCII and the relay does not offer 8BITMIME".into(),
            ));
        }
        params.push(MailParameter::Body(MailBodyParameter::EightBitMime));
    }
    let reply = |stage| move |e| Stop::Reply(stage, e);
    conn.command(Mail::new(envelope.from().cloned(), params))
        .await
        .map_err(reply(Stage::MailFrom))?;
    for to in envelope.to() {
        conn.command(Rcpt::new(to.clone(), vec![]))
            .await
            .map_err(reply(Stage::RcptTo))?;
    }
    conn.command(Data).await.map_err(reply(Stage::Data))?;
    conn.message(bytes).await.map_err(reply(Stage::Message))?;
    Ok(())
}

/// A 4xx or 5xx reply by its class; anything else (a broken connection) as `otherwise`.
fn refusal_class(e: &lettre::transport::smtp::Error, otherwise: RelayFault) -> RelayFault {
    if e.is_transient() {
        RelayFault::Refused4xx
    } else if e.is_permanent() {
        RelayFault::Refused5xx
    } else {
        otherwise
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enhanced_statuses_say_whose_fault_a_refusal_is() {
        let s = EnhancedStatus::opening;
        let status = |class, subject, detail| {
            Some(EnhancedStatus {
                class,
                subject,
                detail,
            })
        };
        assert_eq!(s("5.1.1 No such user"), status(5, 1, 1));
        assert_eq!(s("Relay access denied 5.1.1"), None);
        assert_eq!(s("host 5.1.22.3 said no"), None);
        assert_eq!(s("5.1.22.3 said no"), None);
        let about = |t: &str| {
            let st = s(t).unwrap();
            (st.is_about_recipient(), st.is_about_us())
        };
        assert_eq!(about("5.1.1 x"), (true, false));
        assert_eq!(about("5.2.2 x"), (true, false));
        assert_eq!(about("5.2.3 x"), (false, false));
        assert_eq!(about("5.1.8 x"), (false, true));
        assert_eq!(about("5.7.1 x"), (false, true));
    }
}
