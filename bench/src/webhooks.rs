//! `webhooks`: what an endpoint subscribed to every event costs `/v1/track`, and how fast
//! deliveries reach a local receiver. The same server runs `/v1/track` with no endpoint,
//! then with one subscribed to `*` (the delivery loop walks the event log and POSTs
//! each event, on a connection its lane keeps), and the receiver counts what arrives
//! until the backlog has drained. The goal (#33): tracks with the endpoint at most 15% slower.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client;
use crate::report::Report;
use crate::scenario::Scenario;
use crate::server::Server;

/// A receiver on loopback that answers 200 to every request and counts them. It keeps
/// each connection open for the next request (as receivers behind a web server do),
/// unless the request says `Connection: close`.
async fn receiver(count: Arc<AtomicU64>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                continue;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(4096);
                let mut chunk = [0u8; 4096];
                loop {
                    // Headers, then as much body as Content-Length says.
                    let (used, close) = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                            let len: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse().ok())
                                .unwrap_or(0);
                            if buf.len() >= end + 4 + len {
                                let close = head.lines().any(|l| {
                                    l.strip_prefix("connection:")
                                        .is_some_and(|v| v.trim() == "close")
                                });
                                break (end + 4 + len, close);
                            }
                        }
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    buf.drain(..used);
                    count.fetch_add(1, Ordering::Relaxed);
                    let answer: &[u8] = if close {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
                    };
                    if conn.write_all(answer).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    addr
}

pub fn run(
    rt: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    env: &[(String, String)],
    connections: usize,
    seconds: u64,
) {
    let count = Arc::new(AtomicU64::new(0));
    let addr = rt.block_on(receiver(count.clone()));
    let mut env = env.to_vec();
    env.push((
        "MAILROOM__WEBHOOKS__ALLOW_PRIVATE_ADDRESSES".into(),
        "true".into(),
    ));
    let server = Server::start(bin, &env);
    let load = |server: &Server| {
        let l = rt.block_on(client::run(
            server.addr(),
            Scenario::Track.prepare(server),
            connections,
            Duration::from_secs(1),
            Duration::from_secs(seconds),
        ));
        let r = Report::new("POST /v1/track", l, server.peak_rss_kib());
        assert_eq!(r.errors, 0, "webhooks: /v1/track answered errors");
        r
    };
    // A B B A: the store grows through the run and later phases run slower (measured:
    // the same load twice read 90% and 110%), so the mean of each side cancels a drift.
    let drain = || {
        // Drained: nothing more arrives for two seconds (ten minutes at most).
        let started = Instant::now();
        let mut last = (count.load(Ordering::Relaxed), Instant::now());
        while last.1.elapsed() < Duration::from_secs(2)
            && started.elapsed() < Duration::from_secs(600)
        {
            std::thread::sleep(Duration::from_millis(200));
            let now = count.load(Ordering::Relaxed);
            if now != last.0 {
                last = (now, Instant::now());
            }
        }
        last
    };
    let call = |method: &str, path: &str, body: serde_json::Value| {
        rt.block_on(client::call(
            server.addr(),
            method,
            path,
            Some(&server.secret_key),
            Some(body.to_string()),
        ))
    };
    let mut none = Vec::new();
    let mut with = Vec::new();
    let mut hook: Option<String> = None;
    let (mut delivered, mut delivering) = (0u64, 0f64);
    for phase in ["none", "with", "with", "none"] {
        if phase == "with" {
            let (status, made) = match &hook {
                None => call(
                    "POST",
                    "/webhooks",
                    json!({"url": format!("http://{addr}/hook"), "events": ["*"]}),
                ),
                Some(id) => call(
                    "PATCH",
                    &format!("/webhooks/{id}"),
                    json!({"enabled": true}),
                ),
            };
            assert!(
                status == 200 || status == 201,
                "enabling the endpoint: {made}"
            );
            if hook.is_none() {
                hook = made["data"]["id"].as_str().map(str::to_owned);
            }
            let (before, started) = (count.load(Ordering::Relaxed), Instant::now());
            let r = load(&server);
            print!("an endpoint for *:  ");
            r.print();
            let during = count.load(Ordering::Relaxed) - before;
            let (total, at) = drain();
            let total = total - before;
            let took = at.duration_since(started).as_secs_f64();
            println!(
                "webhooks: {during} deliveries arrived during the {seconds} s load; {total} in all (one per track) in {took:.1} s"
            );
            delivered += total;
            delivering += took;
            with.push(r.per_second);
            let id = hook.as_deref().expect("the endpoint's id");
            let (status, body) = call(
                "PATCH",
                &format!("/webhooks/{id}"),
                json!({"enabled": false}),
            );
            assert_eq!(status, 200, "disabling the endpoint: {body}");
        } else {
            let r = load(&server);
            print!("no endpoint:        ");
            r.print();
            none.push(r.per_second);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "webhooks: /v1/track with an endpoint subscribed to * = {:.1}% of without (means of 2 phases each, A B B A; goal: 85% or more)",
        100.0 * mean(&with) / mean(&none).max(1.0)
    );
    println!(
        "webhooks: {delivered} deliveries in {delivering:.1} s = {:.0} deliveries/s to a local receiver",
        delivered as f64 / delivering.max(0.001)
    );
}
