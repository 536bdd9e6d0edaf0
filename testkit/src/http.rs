//! An HTTP server on loopback for WEBHOOK steps to call: it keeps every request it gets
//! (method, target, headers and body, Content-Length or chunked) and answers each with a
//! fixed status. A real peer, not a mock of Mailroom's own parts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// A request a webhook step made to the test HTTP server.
#[derive(Debug, Clone)]
pub struct Hit {
    pub method: String,
    /// The request target: the path and the query string.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Which connection it came on, counted from 0 in the order they were accepted.
    pub connection: usize,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("a JSON body ({e}): {}", String::from_utf8_lossy(&self.body))
        })
    }
}

/// A small HTTP/1.1 server on loopback that keeps every request it gets and answers each
/// with `status`, an empty body and `Connection: close` (or, made by `keeping_alive`,
/// keeps each connection for the next request).
pub struct HookServer {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    stop: Arc<AtomicBool>,
}

impl HookServer {
    pub fn start(status: u16) -> HookServer {
        HookServer::answering(vec![status])
    }

    /// A server that answers its n-th request with `statuses[n]`, and every request past
    /// the list with its last status (`[500, 503, 200]`: two failures, then success).
    pub fn answering(statuses: Vec<u16>) -> HookServer {
        HookServer::serving(statuses, false)
    }

    /// A server that answers `status` and keeps each connection open for the next
    /// request, as a receiver behind a web server does.
    pub fn keeping_alive(status: u16) -> HookServer {
        HookServer::serving(vec![status], true)
    }

    fn serving(statuses: Vec<u16>, keep_alive: bool) -> HookServer {
        assert!(!statuses.is_empty(), "at least one status");
        let statuses = Arc::new(statuses);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test HTTP server");
        let addr = listener.local_addr().expect("local addr");
        let hits = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopped) = (hits.clone(), stop.clone());
        std::thread::Builder::new()
            .name("test-webhook".into())
            .spawn(move || {
                for (connection, stream) in listener.incoming().enumerate() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (kept, statuses) = (kept.clone(), statuses.clone());
                    let stopped = stopped.clone();
                    std::thread::spawn(move || {
                        let serving = Serving {
                            connection,
                            keep_alive,
                            stopped: &stopped,
                        };
                        serve_hook(stream, serving, &kept, &statuses)
                    });
                }
            })
            .expect("spawn the test HTTP server");
        HookServer { addr, hits, stop }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Reads requests (Content-Length or chunked bodies), keeps each, and answers it: one
/// request, or with `keep_alive` every one until the peer hangs up.
fn serve_hook(stream: TcpStream, serving: Serving, hits: &Mutex<Vec<Hit>>, statuses: &[u16]) {
    let Serving {
        connection,
        keep_alive,
        stopped,
    } = serving;
    let timeout = if keep_alive { 60 } else { 10 };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(timeout)));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut stream = stream;
    while let Some(mut hit) = read_request(&mut reader) {
        // A dropped server answers nothing more, on a kept connection either.
        if stopped.load(Ordering::SeqCst) {
            return;
        }
        hit.connection = connection;
        let status = {
            let mut hits = hits.lock().unwrap();
            let n = hits.len();
            hits.push(hit);
            statuses[n.min(statuses.len() - 1)]
        };
        let reason = match status {
            200 => "OK",
            410 => "Gone",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            _ => "Status",
        };
        let close = if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        };
        let _ = write!(
            stream,
            "HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n{close}\r\n"
        );
        let _ = stream.flush();
        if !keep_alive {
            return;
        }
    }
}

/// Which connection a thread serves, and how.
struct Serving<'a> {
    connection: usize,
    keep_alive: bool,
    stopped: &'a AtomicBool,
}

/// One request off the connection; None when the peer sent nothing more (such as the
/// connection that stops the server).
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Hit> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    let chunked =
        find("Transfer-Encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let size = size.trim().split(';').next().unwrap_or_default().trim();
            let n = usize::from_str_radix(size, 16).unwrap_or(0);
            if n == 0 {
                // Trailers, up to the empty line.
                loop {
                    let mut t = String::new();
                    if reader.read_line(&mut t).unwrap_or(0) == 0 || t.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0; n];
            if reader.read_exact(&mut chunk).is_err() {
                break;
            }
            body.extend_from_slice(&chunk);
            let mut crlf = String::new();
            let _ = reader.read_line(&mut crlf);
        }
    } else if let Some(n) = find("Content-Length").and_then(|v| v.parse::<usize>().ok()) {
        let mut buf = vec![0; n];
        if reader.read_exact(&mut buf).is_ok() {
            body = buf;
        }
    }
    Some(Hit {
        method,
        path,
        headers,
        body,
        connection: 0,
    })
}
