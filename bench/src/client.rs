//! The load: one hyper HTTP/1.1 connection per task (TCP_NODELAY), requests back to
//! back until the deadline, latencies recorded after the warm-up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::scenario::Ctx;

#[derive(Debug, Default)]
pub struct Load {
    /// Microseconds per request, measured after the warm-up.
    pub latencies_us: Vec<u32>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
}

pub async fn run(
    addr: SocketAddr,
    ctx: Arc<Ctx>,
    connections: usize,
    warmup: Duration,
    measure: Duration,
) -> Load {
    let start = Instant::now();
    let measure_from = start + warmup;
    let deadline = measure_from + measure;
    let tasks: Vec<_> = (0..connections)
        .map(|i| {
            tokio::spawn(connection(
                addr,
                ctx.clone(),
                i as u64,
                measure_from,
                deadline,
            ))
        })
        .collect();
    let mut total = Load::default();
    for t in tasks {
        match t.await {
            Ok(l) => {
                total.latencies_us.extend(l.latencies_us);
                total.errors += l.errors;
                total.first_error = total.first_error.or(l.first_error);
            }
            Err(e) => {
                total.errors += 1;
                total.first_error.get_or_insert(e.to_string());
            }
        }
    }
    total.elapsed = measure;
    total
}

async fn connection(
    addr: SocketAddr,
    ctx: Arc<Ctx>,
    seed: u64,
    measure_from: Instant,
    deadline: Instant,
) -> Load {
    let mut load = Load::default();
    let fail = |load: &mut Load, e: String| {
        load.errors += 1;
        load.first_error.get_or_insert(e);
    };
    let stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) => {
            fail(&mut load, e.to_string());
            return load;
        }
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(pair) => pair,
        Err(e) => {
            fail(&mut load, e.to_string());
            return load;
        }
    };
    tokio::spawn(conn);
    let host = addr.to_string();
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let r = ctx.request(seed, n);
        let mut b = Request::builder()
            .method(r.method)
            .uri(r.path)
            .header("host", &host);
        if let Some(a) = &r.auth {
            b = b.header("authorization", a);
        }
        if r.body.is_some() {
            b = b.header("content-type", "application/json");
        }
        let req = b
            .body(Full::new(Bytes::from(r.body.unwrap_or_default())))
            .expect("request");
        let sent = Instant::now();
        if sender.ready().await.is_err() {
            fail(&mut load, "connection closed".into());
            return load;
        }
        let res = match sender.send_request(req).await {
            Ok(res) => res,
            Err(e) => {
                fail(&mut load, e.to_string());
                return load;
            }
        };
        let status = res.status();
        let body = res.into_body().collect().await.map(|b| b.to_bytes());
        let took = sent.elapsed();
        if !status.is_success() {
            let text = body
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            fail(&mut load, format!("{status}: {text}"));
        } else if sent >= measure_from {
            load.latencies_us
                .push(took.as_micros().min(u32::MAX as u128) as u32);
        }
    }
    load
}

/// One request on a fresh connection, for set-up steps: (status, JSON body).
pub async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<String>,
) -> (u16, serde_json::Value) {
    call_as(addr, method, path, auth, "application/json", body).await
}

/// `call` with a body of another content type (a CSV import).
pub async fn call_as(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    content_type: &str,
    body: Option<String>,
) -> (u16, serde_json::Value) {
    let (status, _, json) = exchange(addr, method, path, auth, content_type, body).await;
    (status, json)
}

/// A GET on a fresh connection: (status, the node that served it (`X-Mailroom-Node`),
/// JSON body).
pub async fn get_served(
    addr: SocketAddr,
    path: &str,
    auth: Option<&str>,
) -> (u16, Option<String>, serde_json::Value) {
    let (status, headers, json) = exchange(addr, "GET", path, auth, "application/json", None).await;
    let node = headers
        .get("x-mailroom-node")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, node, json)
}

async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    content_type: &str,
    body: Option<String>,
) -> (u16, hyper::HeaderMap, serde_json::Value) {
    let stream = TcpStream::connect(addr)
        .await
        .expect("connect to the server");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    if let Some(a) = auth {
        b = b.header("authorization", format!("Bearer {a}"));
    }
    let req = b
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("request");
    let res = sender.send_request(req).await.expect("response");
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}
