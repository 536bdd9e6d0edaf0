//! `members`: loads N contacts through POST /contacts, makes a two-condition segment, and
//! times GET /segments/{id} (which counts its members exactly at read time).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;

use crate::client;
use crate::server::Server;

/// Answers that were not a 2xx, and requests that got no answer: a load that counted
/// them as work done would flatter every figure, so every scenario refuses them.
#[derive(Default)]
struct Failures {
    refused: AtomicU64,
    unanswered: AtomicU64,
}

/// One connection's share of `n` POSTs to `path`, the `i`th with `body(i)`.
async fn load(
    addr: SocketAddr,
    auth: String,
    next: Arc<AtomicU64>,
    n: u64,
    path: &'static str,
    body: fn(u64) -> String,
    failures: Arc<Failures>,
) {
    let lost = || failures.unanswered.fetch_add(1, Ordering::Relaxed);
    let Ok(stream) = TcpStream::connect(addr).await else {
        lost();
        return;
    };
    let _ = stream.set_nodelay(true);
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        lost();
        return;
    };
    tokio::spawn(conn);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            return;
        }
        let body = body(i);
        let req = Request::builder()
            .method("POST")
            .uri(path)
            .header("host", addr.to_string())
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        if sender.ready().await.is_err() {
            lost();
            return;
        }
        match sender.send_request(req).await {
            Ok(res) => {
                if !res.status().is_success() {
                    failures.refused.fetch_add(1, Ordering::Relaxed);
                }
                let _ = res.into_body().collect().await;
            }
            Err(_) => {
                lost();
                return;
            }
        }
    }
}

/// Loads `contacts` contacts through POST /contacts over `connections` connections.
pub fn load_contacts(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    contacts: u64,
    connections: usize,
    body: fn(u64) -> String,
) {
    post_many(rt, server, "/contacts", contacts, connections, body);
}

/// `n` POSTs to `path` over `connections` connections, as fast as they answer; how
/// long they took. Panics, naming the counts, when any was refused or went unanswered.
pub fn post_many(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    path: &'static str,
    n: u64,
    connections: usize,
    body: fn(u64) -> String,
) -> std::time::Duration {
    let (addr, auth) = (server.addr(), format!("Bearer {}", server.secret_key));
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Failures::default());
    let started = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..connections)
            .map(|_| {
                let (next, failures) = (next.clone(), failures.clone());
                tokio::spawn(load(addr, auth.clone(), next, n, path, body, failures))
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    let took = started.elapsed();
    let (refused, unanswered) = (
        failures.refused.load(Ordering::Relaxed),
        failures.unanswered.load(Ordering::Relaxed),
    );
    assert!(
        refused == 0 && unanswered == 0,
        "POST {path}: {refused} of {n} answered with an error and {unanswered} connections \
         or requests got no answer; the figures would count them as work done"
    );
    took
}

pub fn member(i: u64) -> String {
    let plan = if i.is_multiple_of(3) { "pro" } else { "free" };
    format!(
        r#"{{"email":"m{i}@bench.example.com","subscribed":{},"data":{{"plan":"{plan}","n":{i}}}}}"#,
        i.is_multiple_of(2)
    )
}

pub fn run(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    contacts: u64,
    connections: usize,
    profile: Option<&std::path::Path>,
) {
    let started = Instant::now();
    load_contacts(rt, server, contacts, connections, member);
    println!(
        "members: loaded {contacts} contacts in {:.1} s; server RSS peak so far {} MiB",
        started.elapsed().as_secs_f64(),
        server.peak_rss_kib() / 1024
    );
    count(rt, server, contacts, profile);
}

/// Makes a two-condition segment and times GET /segments/{id}, which counts its members.
pub fn count(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    contacts: u64,
    profile: Option<&std::path::Path>,
) {
    let addr = server.addr();
    let filters = json!({"name": "Pro subscribers", "filters": {"operator": "AND", "conditions": [
        {"field": "data.plan", "operator": "equals", "value": "pro"},
        {"field": "subscribed", "operator": "equals", "value": true}]}});
    let key = Some(server.secret_key.as_str());
    // The segment's creation counts its members too: the first count, which picks
    // `data.plan` out of every contact's JSON (the later ones read what the rows kept).
    let t = Instant::now();
    let (status, seg) = rt.block_on(client::call(
        addr,
        "POST",
        "/segments",
        key,
        Some(filters.to_string()),
    ));
    let first_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(status, 201, "creating the segment: {seg}");
    let path = format!("/segments/{}", seg["id"].as_str().unwrap_or_default());
    let mut times = Vec::new();
    let mut count = serde_json::Value::Null;
    for _ in 0..5 {
        let t = Instant::now();
        let (code, s) = rt.block_on(client::call(addr, "GET", &path, key, None));
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(code, 200, "GET {path}: {s}");
        assert!(
            s["memberCount"].is_u64(),
            "GET {path}: no memberCount in {s}"
        );
        count = s["memberCount"].clone();
    }
    if let Some(dir) = profile {
        // The count alone, asked again and again for the recording's 6 s.
        let recording = crate::profile::record_after(dir, "sled-members", server.pid(), 0, 6);
        let until = Instant::now() + std::time::Duration::from_secs(7);
        while Instant::now() < until {
            let (code, _) = rt.block_on(client::call(addr, "GET", &path, key, None));
            assert_eq!(code, 200, "GET {path}");
        }
        recording.finish();
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "members: GET /segments/{{id}} over {contacts} contacts (two conditions) answers memberCount {count} in {:.0} ms median, {:.0} ms best (the first count, at POST /segments: {first_ms:.0} ms; #35 goal at 1M: 3x faster than 145 ms, 48 ms); server peak RSS {} MiB",
        times[2],
        times[0],
        server.peak_rss_kib() / 1024
    );
}
