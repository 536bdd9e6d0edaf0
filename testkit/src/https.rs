//! An HTTPS server on loopback that serves fixed files (a signer's certificate, a
//! confirmation URL) under a throwaway CA's certificate for `127.0.0.1`, and keeps
//! each request's method and target. Plain threads and rustls, as the HTTP server.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_rustls::rustls::{ServerConnection, StreamOwned};

use crate::tls::TestCertificates;

pub struct FileServer {
    addr: SocketAddr,
    ca_pem: String,
    hits: Arc<Mutex<Vec<(String, String)>>>,
    stop: Arc<AtomicBool>,
}

impl FileServer {
    /// Serves each `(path, body)` with 200 (a path it does not have: 404). A path
    /// matches a request's target without its query string.
    pub fn start(files: Vec<(String, Vec<u8>)>) -> FileServer {
        let certs = TestCertificates::generate();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test HTTPS server");
        let addr = listener.local_addr().expect("local addr");
        let hits = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopped, config) = (hits.clone(), stop.clone(), certs.config.clone());
        let files = Arc::new(files);
        std::thread::Builder::new()
            .name("test-https".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (kept, files, config) = (kept.clone(), files.clone(), config.clone());
                    std::thread::spawn(move || {
                        let Ok(conn) = ServerConnection::new(config) else {
                            return;
                        };
                        serve(StreamOwned::new(conn, stream), &kept, &files);
                    });
                }
            })
            .expect("spawn the test HTTPS server");
        FileServer {
            addr,
            ca_pem: certs.ca_pem,
            hits,
            stop,
        }
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// `127.0.0.1:<port>`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// The CA that signed the server's certificate (PEM), for the client to trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// (method, target) of each request, in order.
    pub fn hits(&self) -> Vec<(String, String)> {
        self.hits.lock().unwrap().clone()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(
    mut stream: StreamOwned<ServerConnection, TcpStream>,
    hits: &Mutex<Vec<(String, String)>>,
    files: &[(String, Vec<u8>)],
) {
    let _ = stream.sock.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&mut stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim_end().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    hits.lock().unwrap().push((method, target.clone()));
    let path = target.split('?').next().unwrap_or_default();
    let answer = match files.iter().find(|(p, _)| p == path) {
        Some((_, body)) => {
            let mut a = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            a.extend_from_slice(body);
            a
        }
        None => {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
        }
    };
    let _ = stream.write_all(&answer);
    let _ = stream.flush();
    stream.conn.send_close_notify();
    let _ = stream.flush();
}
