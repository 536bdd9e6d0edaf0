//! A small SMTP server (RFC 5321 subset: EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT)
//! that keeps what it receives and can be told how to answer the end of DATA, so that
//! tests can make it refuse (451, 550) and then accept. It runs on its own thread and
//! tokio runtime, and sets TCP_NODELAY on every connection. Started with a `TlsMode`
//! it also speaks STARTTLS (RFC 3207) or implicit TLS (RFC 8314), with a certificate
//! from a CA made at start (see `tls.rs`).
//!
//! For fault injection it can also keep refusing a step until told to stop
//! (`keep_refusing`, `clear_refusals`), hang in the middle of DATA (`hang_in_data`), and
//! drop connections on accept or after its greeting (`drop_connections`,
//! `drop_after_greeting`), and keep new connections waiting for their greeting
//! (`hold_greeting`); each fault counts what it did, so that a test can wait until
//! the client under test has met it instead of sleeping.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::tls::TestCertificates;

/// How the server speaks TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Clear text only; EHLO does not offer STARTTLS.
    Plain,
    /// Offers STARTTLS in EHLO and upgrades on it; mail in clear is still accepted.
    Starttls,
    /// The TLS handshake comes first, before the greeting (port 465 style).
    Implicit,
}

#[derive(Debug, Clone)]
pub struct Received {
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub data: Vec<u8>,
    pub at: Instant,
    /// Whether the message came over TLS (after STARTTLS, or on an implicit-TLS server).
    pub tls: bool,
}

impl Received {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    arrived: Condvar,
    /// Replies to give at the end of DATA, in order; afterwards 250.
    script: Mutex<VecDeque<u16>>,
    /// When true, keep no message bodies (the bench counts only).
    count_only: std::sync::atomic::AtomicBool,
    count: std::sync::atomic::AtomicU64,
    /// How AUTH is answered, once `auth` has been called: EHLO then offers it.
    auth: Mutex<Option<Auth>>,
    /// Replies to give instead of 250/354 at a stage, in order.
    refusals: Mutex<Vec<(Stage, String)>>,
    /// Replies given at a stage every time, until `clear_refusals` (`keep_refusing`).
    standing: Mutex<Vec<(Stage, String)>>,
    /// Refusals given so far, queued and standing.
    refused: AtomicU64,
    /// `hang_in_data`: DATA gets its 354, then nothing more is ever answered.
    hang_in_data: AtomicBool,
    /// Transactions hung in DATA so far.
    hung: AtomicU64,
    /// `drop_connections`: close new connections on accept, open ones at their next command.
    drop_on_accept: AtomicBool,
    /// `drop_after_greeting`: greet, then close at the first command (open ones at the next).
    drop_after_greeting: AtomicBool,
    /// Connections closed by the two above so far.
    dropped: AtomicU64,
    /// `hold_greeting`: new connections wait for their 220 until it is turned off.
    hold_greeting: AtomicBool,
    /// Rings when `hold_greeting` is turned off.
    greeting_freed: tokio::sync::Notify,
    /// Connections that waited for their greeting so far.
    held: AtomicU64,
}

/// A step of an SMTP transaction that the server can be told to refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    MailFrom,
    RcptTo,
    Data,
    /// The reply after the message's final dot.
    EndOfData,
}

/// How the server answers AUTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// 235: any credentials are good.
    Accept,
    /// 535: the credentials are refused.
    Refuse,
    /// No answer at all, ever (a relay that hangs in the login step).
    Hang,
}

pub struct SmtpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    certificates: Option<Arc<TestCertificates>>,
}

impl SmtpServer {
    /// Starts on a free loopback port.
    pub fn start() -> SmtpServer {
        Self::start_on("127.0.0.1:0".parse().expect("address"))
    }

    /// Starts on a free loopback port in the given TLS mode, with a fresh CA and a
    /// certificate for `localhost` and `127.0.0.1` (see `ca_pem`).
    pub fn start_tls(mode: TlsMode) -> SmtpServer {
        let certificates = (mode != TlsMode::Plain).then(|| Arc::new(TestCertificates::generate()));
        Self::start_with("127.0.0.1:0".parse().expect("address"), mode, certificates)
    }

    /// Starts on a given address (to come back on the same port after a stop).
    pub fn start_on(addr: SocketAddr) -> SmtpServer {
        Self::start_with(addr, TlsMode::Plain, None)
    }

    fn start_with(
        addr: SocketAddr,
        mode: TlsMode,
        certificates: Option<Arc<TestCertificates>>,
    ) -> SmtpServer {
        let shared = Arc::new(Shared::default());
        let (stop, stop_rx) = watch::channel(false);
        let (tx, rx) = std::sync::mpsc::channel();
        let s = shared.clone();
        let acceptor = certificates.as_ref().map(|c| c.acceptor.clone());
        std::thread::Builder::new()
            .name("test-smtp".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async move {
                    let listener = TcpListener::bind(addr)
                        .await
                        .expect("bind the test SMTP server");
                    tx.send(listener.local_addr().expect("local addr"))
                        .expect("report address");
                    let mut stop_rx = stop_rx;
                    loop {
                        tokio::select! {
                            accepted = listener.accept() => {
                                if let Ok((stream, _)) = accepted {
                                    if s.drop_on_accept.load(Ordering::SeqCst) {
                                        // Closed before the greeting (drop_connections).
                                        s.dropped.fetch_add(1, Ordering::SeqCst);
                                        drop(stream);
                                    } else {
                                        let _ = stream.set_nodelay(true);
                                        let tls = (mode, acceptor.clone());
                                        tokio::spawn(session(stream, s.clone(), tls, stop_rx.clone()));
                                    }
                                }
                            }
                            _ = stop_rx.changed() => break,
                        }
                    }
                });
            })
            .expect("spawn the test SMTP server");
        let addr = rx.recv().expect("the test SMTP server started");
        SmtpServer {
            addr,
            shared,
            stop,
            certificates,
        }
    }

    /// The PEM of the CA that signed the server's certificate (TLS modes only): what a
    /// client adds to its trusted roots.
    pub fn ca_pem(&self) -> Option<&str> {
        self.certificates.as_ref().map(|c| c.ca_pem.as_str())
    }

    /// The server's own certificate (PEM), TLS modes only.
    pub fn cert_pem(&self) -> Option<&str> {
        self.certificates.as_ref().map(|c| c.cert_pem.as_str())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The next end-of-DATA replies, e.g. `[451, 451]` then the default 250.
    pub fn script(&self, replies: &[u16]) {
        self.shared
            .script
            .lock()
            .unwrap()
            .extend(replies.iter().copied());
    }

    /// The next command at `stage` gets `reply` (a whole line such as
    /// "550 5.1.1 No such user") instead of its usual success.
    pub fn refuse(&self, stage: Stage, reply: &str) {
        self.shared
            .refusals
            .lock()
            .unwrap()
            .push((stage, format!("{}\r\n", reply.trim_end())));
    }

    /// Every command at `stage` gets `reply` (a whole line such as
    /// "451 4.3.0 Try again later") instead of its usual success, from now until
    /// `clear_refusals`: a relay that keeps refusing for a while. Replies queued with
    /// `refuse` still come first.
    pub fn keep_refusing(&self, stage: Stage, reply: &str) {
        self.shared
            .standing
            .lock()
            .unwrap()
            .push((stage, format!("{}\r\n", reply.trim_end())));
    }

    /// Ends every refusal: the standing ones (`keep_refusing`) and the queued ones
    /// (`refuse`) not given yet. Commands get their usual success again.
    pub fn clear_refusals(&self) {
        self.shared.standing.lock().unwrap().clear();
        self.shared.refusals.lock().unwrap().clear();
    }

    /// Refusals given so far, queued (`refuse`) and standing (`keep_refusing`).
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// While on, DATA gets its 354 and then the server reads whatever the client sends
    /// and never answers again, until the client gives up and closes the connection: a
    /// relay that hangs mid-DATA. The message is not kept. Turned off, later transactions
    /// go through; a transaction already hung stays hung until its client gives up.
    pub fn hang_in_data(&self, on: bool) {
        self.shared.hang_in_data.store(on, Ordering::SeqCst);
    }

    /// Transactions hung in DATA so far (`hang_in_data`).
    pub fn hung(&self) -> u64 {
        self.shared.hung.load(Ordering::SeqCst)
    }

    /// While on, the server closes each new connection as soon as it accepts it, before
    /// the greeting, and each open connection at its next command, without a reply: a
    /// relay that drops connections. A transaction cut short is not kept (the server
    /// never drops a connection between the end of DATA and its 250).
    pub fn drop_connections(&self, on: bool) {
        self.shared.drop_on_accept.store(on, Ordering::SeqCst);
    }

    /// While on, the server greets each new connection (220) and closes it at the
    /// client's first command, without a reply; open connections are closed at their
    /// next command, as with `drop_connections`.
    pub fn drop_after_greeting(&self, on: bool) {
        self.shared.drop_after_greeting.store(on, Ordering::SeqCst);
    }

    /// While on, the server accepts each new connection and keeps it waiting for its
    /// greeting (220) until turned off: a relay slow to answer, which holds the client
    /// before its transaction begins. Turned off, every waiting connection is greeted.
    pub fn hold_greeting(&self, on: bool) {
        self.shared.hold_greeting.store(on, Ordering::SeqCst);
        if !on {
            self.shared.greeting_freed.notify_waiters();
        }
    }

    /// Connections that have waited for their greeting so far (`hold_greeting`).
    pub fn held(&self) -> u64 {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// Connections closed so far by `drop_connections` and `drop_after_greeting`.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Offers AUTH PLAIN and LOGIN in EHLO from now on, and answers AUTH as `mode` says.
    pub fn auth(&self, mode: Auth) {
        *self.shared.auth.lock().unwrap() = Some(mode);
    }

    pub fn count_only(&self) {
        self.shared
            .count_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Messages accepted so far (250 at the end of DATA).
    pub fn count(&self) -> u64 {
        self.shared.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Waits until at least `n` messages were accepted, or the timeout passes.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        let mut got = self.shared.received.lock().unwrap();
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            got = self.shared.arrived.wait_timeout(got, left).unwrap().0;
        }
        got.clone()
    }

    /// Stops listening and drops every open connection.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn session(
    stream: TcpStream,
    shared: Arc<Shared>,
    tls: (TlsMode, Option<TlsAcceptor>),
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        _ = serve(stream, shared, tls) => {}
        _ = stop.changed() => {}
    }
}

/// What ended a conversation.
enum End {
    Closed,
    /// The client said STARTTLS and got 220: the handshake comes next.
    StartTls,
}

async fn serve(
    stream: TcpStream,
    shared: Arc<Shared>,
    (mode, acceptor): (TlsMode, Option<TlsAcceptor>),
) -> std::io::Result<()> {
    let tls = || acceptor.clone().expect("TLS modes have certificates");
    match mode {
        TlsMode::Plain => {
            converse(
                &mut BufReader::new(stream),
                &shared,
                Phase::Clear { offer: false },
            )
            .await?;
        }
        TlsMode::Implicit => {
            let stream = tls().accept(stream).await?;
            converse(&mut BufReader::new(stream), &shared, Phase::Implicit).await?;
        }
        TlsMode::Starttls => {
            let mut clear = BufReader::new(stream);
            if let End::StartTls =
                converse(&mut clear, &shared, Phase::Clear { offer: true }).await?
            {
                // Whatever the client pipelined after STARTTLS is dropped (RFC 3207, 4.2).
                let stream = tls().accept(clear.into_inner()).await?;
                converse(&mut BufReader::new(stream), &shared, Phase::Upgraded).await?;
            }
        }
    }
    Ok(())
}

/// Where a conversation stands with respect to TLS.
#[derive(Clone, Copy)]
enum Phase {
    /// Clear text; `offer` says whether EHLO lists STARTTLS.
    Clear { offer: bool },
    /// TLS from the first byte: greet as usual.
    Implicit,
    /// After STARTTLS: no new greeting, the client starts over with EHLO.
    Upgraded,
}

async fn converse<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
    shared: &Shared,
    phase: Phase,
) -> std::io::Result<End> {
    if !matches!(phase, Phase::Upgraded) {
        if shared.hold_greeting.load(Ordering::SeqCst) {
            shared.held.fetch_add(1, Ordering::SeqCst);
            loop {
                // Made before the flag is read again: a `hold_greeting(false)` between
                // the two still wakes it (notify_waiters reaches futures not yet polled).
                let freed = shared.greeting_freed.notified();
                if !shared.hold_greeting.load(Ordering::SeqCst) {
                    break;
                }
                freed.await;
            }
        }
        conn.write_all(b"220 test-smtp ready\r\n").await?;
        conn.flush().await?;
    }
    let tls = !matches!(phase, Phase::Clear { .. });
    let offer_starttls = matches!(phase, Phase::Clear { offer: true });
    let mut line = String::new();
    let mut from = String::new();
    let mut rcpt = Vec::new();
    let mut out = Vec::new();
    loop {
        line.clear();
        if conn.read_line(&mut line).await? == 0 {
            return Ok(End::Closed);
        }
        if shared.drop_on_accept.load(Ordering::SeqCst)
            || shared.drop_after_greeting.load(Ordering::SeqCst)
        {
            // Hang up on the command, unanswered (drop_connections, drop_after_greeting).
            shared.dropped.fetch_add(1, Ordering::SeqCst);
            return Ok(End::Closed);
        }
        let upper = line.to_ascii_uppercase();
        let auth = *shared.auth.lock().unwrap();
        let refusal = |stage: Stage| refusal_for(shared, stage);
        let reply: &[u8] = if upper.starts_with("EHLO") && auth.is_some() {
            b"250-test-smtp\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-AUTH PLAIN LOGIN\r\n250 SMTPUTF8\r\n"
        } else if upper.starts_with("AUTH") {
            match auth {
                Some(Auth::Accept) => b"235 2.7.0 Authentication successful\r\n",
                Some(Auth::Refuse) => b"535 5.7.8 Authentication credentials invalid\r\n",
                Some(Auth::Hang) => std::future::pending().await,
                None => b"502 5.5.1 AUTH not offered\r\n",
            }
        } else if upper.starts_with("EHLO") {
            if offer_starttls {
                b"250-test-smtp\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-STARTTLS\r\n250 SMTPUTF8\r\n"
            } else {
                b"250-test-smtp\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n"
            }
        } else if upper.starts_with("STARTTLS") {
            if offer_starttls {
                send_now(conn, &mut out, b"220 2.0.0 ready to start TLS\r\n").await?;
                return Ok(End::StartTls);
            }
            b"502 5.5.1 STARTTLS not offered\r\n"
        } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
            b"250 OK\r\n"
        } else if let Some(reply) = [
            ("MAIL FROM:", Stage::MailFrom),
            ("RCPT TO:", Stage::RcptTo),
            ("DATA", Stage::Data),
        ]
        .iter()
        .find(|(verb, _)| upper.starts_with(verb))
        .and_then(|(_, s)| refusal(*s))
        {
            // Looked up and taken in one step: a refusal cleared meanwhile is not half-given.
            send(conn, &mut out, reply.as_bytes()).await?;
            continue;
        } else if upper.starts_with("MAIL FROM:") {
            from = address(&line[10..]);
            rcpt.clear();
            b"250 OK\r\n"
        } else if upper.starts_with("RCPT TO:") {
            rcpt.push(address(&line[8..]));
            b"250 OK\r\n"
        } else if upper.starts_with("RSET") {
            from.clear();
            rcpt.clear();
            b"250 OK\r\n"
        } else if upper.starts_with("QUIT") {
            send_now(conn, &mut out, b"221 bye\r\n").await?;
            return Ok(End::Closed);
        } else if upper.starts_with("DATA") {
            if shared.hang_in_data.load(Ordering::SeqCst) {
                send_now(conn, &mut out, b"354 go ahead\r\n").await?;
                shared.hung.fetch_add(1, Ordering::SeqCst);
                // Take what the client sends and never answer, until it gives up.
                let mut sink = [0u8; 4096];
                while conn.read(&mut sink).await? > 0 {}
                return Ok(End::Closed);
            }
            send(conn, &mut out, b"354 go ahead\r\n").await?;
            let data = read_data(conn).await?;
            if let Some(reply) = refusal(Stage::EndOfData) {
                send(conn, &mut out, reply.as_bytes()).await?;
                continue;
            }
            let code = shared.script.lock().unwrap().pop_front().unwrap_or(250);
            if code == 250 {
                shared
                    .count
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let keep = !shared.count_only.load(std::sync::atomic::Ordering::Relaxed);
                let mut got = shared.received.lock().unwrap();
                got.push(Received {
                    mail_from: std::mem::take(&mut from),
                    rcpt_to: std::mem::take(&mut rcpt),
                    data: if keep { data } else { Vec::new() },
                    at: Instant::now(),
                    tls,
                });
                shared.arrived.notify_all();
                b"250 OK queued\r\n"
            } else if code == 451 {
                b"451 4.3.0 try again later\r\n"
            } else {
                b"550 5.1.1 no such user\r\n"
            }
        } else {
            b"500 unknown command\r\n"
        };
        send(conn, &mut out, reply).await?;
    }
}

/// The refusal to give at `stage`, if any: the first one queued for it (taken), else the
/// standing one (kept). Counted in `refused`.
fn refusal_for(shared: &Shared, stage: Stage) -> Option<String> {
    let queued = {
        let mut r = shared.refusals.lock().unwrap();
        r.iter()
            .position(|(s, _)| *s == stage)
            .map(|at| r.remove(at).1)
    };
    let reply = queued.or_else(|| {
        shared
            .standing
            .lock()
            .unwrap()
            .iter()
            .find(|(s, _)| *s == stage)
            .map(|(_, reply)| reply.clone())
    });
    if reply.is_some() {
        shared.refused.fetch_add(1, Ordering::SeqCst);
    }
    reply
}

/// Queues a reply, and writes the queue once the client's pipelined commands are all read
/// (RFC 2920): one write per batch of commands rather than one per reply keeps this
/// server's ceiling above what the bench's clients can push.
async fn send<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
    out: &mut Vec<u8>,
    reply: &[u8],
) -> std::io::Result<()> {
    out.extend_from_slice(reply);
    if conn.buffer().is_empty() {
        write_out(conn, out).await?;
    }
    Ok(())
}

/// Writes every queued reply and then `last`, whatever is left to read.
async fn send_now<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
    out: &mut Vec<u8>,
    last: &[u8],
) -> std::io::Result<()> {
    out.extend_from_slice(last);
    write_out(conn, out).await
}

async fn write_out<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    conn.write_all(out).await?;
    // A TLS stream may hold the reply in its buffer until flushed; TCP's flush is free.
    conn.flush().await?;
    out.clear();
    Ok(())
}

fn address(arg: &str) -> String {
    let arg = arg.trim();
    let inner = arg
        .strip_prefix('<')
        .and_then(|a| a.split_once('>'))
        .map_or(arg, |(a, _)| a);
    inner.to_owned()
}

/// Reads up to the lone "." line, undoing dot-stuffing.
async fn read_data<R: AsyncReadExt + AsyncBufReadExt + Unpin>(
    read: &mut R,
) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if read.read_until(b'\n', &mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == b".\r\n" || line == b".\n" {
            return Ok(data);
        }
        let content = if line.starts_with(b"..") {
            &line[1..]
        } else {
            &line[..]
        };
        data.extend_from_slice(content);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpStream;
    use tokio_rustls::rustls::crypto::ring;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};
    use tokio_rustls::TlsConnector;

    use super::*;

    /// The EHLO reply of a clear-text connection.
    async fn ehlo(addr: SocketAddr) -> String {
        let mut conn = BufReader::new(TcpStream::connect(addr).await.unwrap());
        let mut text = String::new();
        conn.read_line(&mut text).await.unwrap();
        conn.write_all(b"EHLO me\r\n").await.unwrap();
        loop {
            let mut line = String::new();
            conn.read_line(&mut line).await.unwrap();
            text.push_str(&line);
            if line.as_bytes().get(3) == Some(&b' ') {
                return text;
            }
        }
    }

    /// Sends one command line and reads the reply's (first) line.
    async fn command(conn: &mut BufReader<TcpStream>, line: &str) -> String {
        conn.write_all(line.as_bytes()).await.unwrap();
        let mut reply = String::new();
        conn.read_line(&mut reply).await.unwrap();
        reply
    }

    /// A clear-text connection whose greeting has been read.
    async fn greeted(addr: SocketAddr) -> BufReader<TcpStream> {
        let mut conn = BufReader::new(TcpStream::connect(addr).await.unwrap());
        let mut greeting = String::new();
        conn.read_line(&mut greeting).await.unwrap();
        assert!(greeting.starts_with("220 "), "{greeting}");
        conn
    }

    #[tokio::test]
    async fn a_standing_refusal_answers_every_command_at_its_stage_until_cleared() {
        let server = SmtpServer::start();
        server.keep_refusing(Stage::RcptTo, "451 4.3.0 Try again later");
        let mut conn = greeted(server.addr()).await;
        assert!(command(&mut conn, "HELO me\r\n").await.starts_with("250"));
        let mail = command(&mut conn, "MAIL FROM:<a@example.com>\r\n").await;
        assert!(mail.starts_with("250"), "{mail}");
        for _ in 0..3 {
            let rcpt = command(&mut conn, "RCPT TO:<b@example.com>\r\n").await;
            assert!(rcpt.starts_with("451 4.3.0"), "{rcpt}");
        }
        assert_eq!(server.refused(), 3);
        server.clear_refusals();
        let rcpt = command(&mut conn, "RCPT TO:<b@example.com>\r\n").await;
        assert!(rcpt.starts_with("250"), "{rcpt}");
        assert_eq!(server.refused(), 3);
    }

    #[tokio::test]
    async fn a_hanging_server_answers_data_with_354_and_then_never_again() {
        let server = SmtpServer::start();
        server.hang_in_data(true);
        let mut conn = greeted(server.addr()).await;
        for line in [
            "HELO me\r\n",
            "MAIL FROM:<a@example.com>\r\n",
            "RCPT TO:<b@example.com>\r\n",
        ] {
            assert!(command(&mut conn, line).await.starts_with("250"), "{line}");
        }
        let data = command(&mut conn, "DATA\r\n").await;
        assert!(data.starts_with("354"), "{data}");
        conn.write_all(b"Subject: s\r\n\r\nbody\r\n.\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        let answer =
            tokio::time::timeout(Duration::from_millis(300), conn.read_line(&mut reply)).await;
        assert!(answer.is_err(), "no answer after the message: {reply}");
        assert_eq!((server.hung(), server.count()), (1, 0), "hung, not kept");
    }

    #[tokio::test]
    async fn a_dropping_server_closes_connections_on_accept_or_after_its_greeting() {
        let server = SmtpServer::start();
        let mut open = greeted(server.addr()).await;
        server.drop_connections(true);
        let mut conn = BufReader::new(TcpStream::connect(server.addr()).await.unwrap());
        let mut line = String::new();
        let read = conn.read_line(&mut line).await.unwrap_or(0);
        assert_eq!(read, 0, "closed before the greeting: {line}");
        // The connection opened before is closed at its next command, unanswered.
        open.write_all(b"NOOP\r\n").await.unwrap();
        line.clear();
        assert_eq!(open.read_line(&mut line).await.unwrap_or(0), 0, "{line}");
        assert_eq!(server.dropped(), 2);

        server.drop_connections(false);
        server.drop_after_greeting(true);
        let mut conn = greeted(server.addr()).await;
        conn.write_all(b"EHLO me\r\n").await.unwrap();
        line.clear();
        assert_eq!(conn.read_line(&mut line).await.unwrap_or(0), 0, "{line}");
        assert_eq!(server.dropped(), 3);

        server.drop_after_greeting(false);
        assert!(ehlo(server.addr()).await.contains("250 SMTPUTF8"));
    }

    #[tokio::test]
    async fn only_a_starttls_server_offers_starttls() {
        let plain = SmtpServer::start();
        let starttls = SmtpServer::start_tls(TlsMode::Starttls);
        assert!(!ehlo(plain.addr()).await.contains("STARTTLS"));
        assert!(ehlo(starttls.addr()).await.contains("250-STARTTLS"));
        assert!(plain.ca_pem().is_none() && starttls.ca_pem().is_some());
    }

    #[tokio::test]
    async fn an_implicit_tls_server_greets_after_a_handshake_that_its_ca_verifies() {
        let server = SmtpServer::start_tls(TlsMode::Implicit);
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(server.ca_pem().unwrap().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = TcpStream::connect(server.addr()).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("the certificate verifies for localhost");
        let mut greeting = String::new();
        BufReader::new(tls).read_line(&mut greeting).await.unwrap();
        assert!(greeting.starts_with("220 "), "{greeting}");
    }
}
