//! `webhooks`: what an endpoint subscribed to every event costs `/v1/track`, and how fast
//! deliveries reach a local receiver. The same server runs `/v1/track` with no endpoint,
//! then with one subscribed to `*` (each track then writes a delivery in its batch and
//! the delivery loop POSTs it), and the receiver counts what arrives until the backlog
//! has drained. The goal (#33): tracks with the endpoint at most 15% slower.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client;
use crate::report::Report;
use crate::scenario::Scenario;
use crate::server::Server;

/// A receiver on loopback that answers 200 to every request and counts them.
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
                // Headers, then as much body as Content-Length says.
                let mut buf = Vec::with_capacity(4096);
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break;
                    }
                }
                count.fetch_add(1, Ordering::Relaxed);
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
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
    let none = load(&server);
    print!("no endpoint:        ");
    none.print();
    let (status, made) = rt.block_on(client::call(
        server.addr(),
        "POST",
        "/webhooks",
        Some(&server.secret_key),
        Some(json!({"url": format!("http://{addr}/hook"), "events": ["*"]}).to_string()),
    ));
    assert_eq!(status, 201, "creating the endpoint: {made}");
    let (before, started) = (count.load(Ordering::Relaxed), Instant::now());
    let with = load(&server);
    print!("an endpoint for *:  ");
    with.print();
    println!(
        "webhooks: /v1/track with an endpoint subscribed to * = {:.1}% of without (goal: 85% or more)",
        100.0 * with.per_second / none.per_second.max(1.0)
    );
    let during = count.load(Ordering::Relaxed) - before;
    // Drained: nothing more arrives for two seconds.
    let mut last = (count.load(Ordering::Relaxed), Instant::now());
    while last.1.elapsed() < Duration::from_secs(2) && started.elapsed() < Duration::from_secs(600)
    {
        std::thread::sleep(Duration::from_millis(200));
        let now = count.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        }
    }
    let total = last.0 - before;
    let took = last.1.duration_since(started).as_secs_f64();
    println!(
        "webhooks: {during} deliveries arrived during the {seconds} s load; {total} in all (one per track) in {took:.1} s = {:.0} deliveries/s to a local receiver",
        total as f64 / took.max(0.001)
    );
}
