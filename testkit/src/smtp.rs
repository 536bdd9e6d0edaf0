//! A small SMTP server (RFC 5321 subset: EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT)
//! that keeps what it receives and can be told how to answer the end of DATA, so that
//! tests can make it refuse (451, 550) and then accept. It runs on its own thread and
//! tokio runtime, and sets TCP_NODELAY on every connection.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone)]
pub struct Received {
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub data: Vec<u8>,
    pub at: Instant,
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
}

pub struct SmtpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

impl SmtpServer {
    /// Starts on a free loopback port.
    pub fn start() -> SmtpServer {
        Self::start_on("127.0.0.1:0".parse().expect("address"))
    }

    /// Starts on a given address (to come back on the same port after a stop).
    pub fn start_on(addr: SocketAddr) -> SmtpServer {
        let shared = Arc::new(Shared::default());
        let (stop, stop_rx) = watch::channel(false);
        let (tx, rx) = std::sync::mpsc::channel();
        let s = shared.clone();
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
                                    let _ = stream.set_nodelay(true);
                                    tokio::spawn(session(stream, s.clone(), stop_rx.clone()));
                                }
                            }
                            _ = stop_rx.changed() => break,
                        }
                    }
                });
            })
            .expect("spawn the test SMTP server");
        let addr = rx.recv().expect("the test SMTP server started");
        SmtpServer { addr, shared, stop }
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

async fn session(stream: TcpStream, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    tokio::select! {
        _ = serve(stream, shared) => {}
        _ = stop.changed() => {}
    }
}

async fn serve(stream: TcpStream, shared: Arc<Shared>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write.write_all(b"220 test-smtp ready\r\n").await?;
    let mut line = String::new();
    let mut from = String::new();
    let mut rcpt = Vec::new();
    loop {
        line.clear();
        if read.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let upper = line.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") {
            b"250-test-smtp\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n"
        } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
            b"250 OK\r\n"
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
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else if upper.starts_with("DATA") {
            write.write_all(b"354 go ahead\r\n").await?;
            let data = read_data(&mut read).await?;
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
        write.write_all(reply).await?;
    }
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
