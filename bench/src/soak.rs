//! `soak`: a mixed load for `--soak-minutes` (default 10) on a fresh server (pacing off):
//! upserts, tracks that start a workflow execution (a one-hour DELAY, then SEND_EMAIL)
//! for new contacts, and sends, each on a few connections. Every 30 s it prints the
//! server's RSS, open descriptors, write-ahead-log size and each load's p99 over those
//! 30 s; at the end, how much each moved after the first two minutes.

use std::path::Path;
use std::time::Duration;

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::json;

use crate::scenario::Scenario;
use crate::server::Server;
use crate::{client, report, setup};

const INTERVAL: Duration = Duration::from_secs(30);

fn dir_bytes(path: &Path) -> u64 {
    std::fs::read_dir(path).map_or(0, |d| {
        d.flatten()
            .map(|e| e.metadata().map_or(0, |m| m.len()))
            .sum()
    })
}

pub fn run(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    dns: &TestDns,
    smtp_connections: usize,
    minutes: u64,
    contacts: u64,
) {
    let smtp = SmtpServer::start();
    smtp.count_only();
    let server = Server::start(bin, &setup::env(dns, &smtp, 0, smtp_connections));
    setup::verify_domain(rt, &server, dns);
    let body = json!({"name": "soak", "triggerEvent": "signed-in", "enabled": true, "allowReentry": false,
        "steps": [{"id": "wait", "type": "DELAY", "config": {"amount": 1, "unit": "hours"}, "next": null}]});
    let (status, w) = rt.block_on(client::call(
        server.addr(),
        "POST",
        "/workflows",
        Some(&server.secret_key),
        Some(body.to_string()),
    ));
    assert_eq!(status, 201, "the soak's workflow: {w}");
    let rounds = (minutes * 60 / INTERVAL.as_secs()).max(1);
    println!(
        "soak: {minutes} min of upserts (4 connections), tracks starting a workflow (4) and sends (2), pacing off"
    );
    let mut samples = Vec::new();
    for round in 1..=rounds {
        let loads: Vec<_> = [
            (Scenario::Contacts, 4),
            (Scenario::Track, 4),
            (Scenario::Send, 2),
        ]
        .into_iter()
        .map(|(s, n)| {
            let ctx = match contacts {
                0 => s.prepare(&server),
                k => s.prepare_bounded(&server, k),
            };
            rt.spawn(client::run(server.addr(), ctx, n, Duration::ZERO, INTERVAL))
        })
        .collect();
        let reports: Vec<report::Report> = loads
            .into_iter()
            .zip(["contacts", "track", "send"])
            .map(|(l, name)| report::Report::new(name, rt.block_on(l).expect("load"), 0))
            .collect();
        let (rss, fds) = (server.rss_kib() / 1024, server.open_fds());
        let wal = dir_bytes(&server.data_dir().join("wal")) / (1 << 20);
        let db = dir_bytes(&server.data_dir().join("db")) / (1 << 20);
        println!(
            "soak {:>5} s: RSS {rss} MiB, fds {fds}, WAL {wal} MiB, sled {db} MiB, p99 contacts {:.1} ms ({:.0}/s), track {:.1} ms ({:.0}/s), send {:.1} ms ({:.0}/s), delivered {}",
            round * INTERVAL.as_secs(),
            reports[0].p99_ms,
            reports[0].per_second,
            reports[1].p99_ms,
            reports[1].per_second,
            reports[2].p99_ms,
            reports[2].per_second,
            smtp.count()
        );
        samples.push((rss, fds as u64, wal));
    }
    // After the first two minutes (four samples): the range of each figure.
    let settled: Vec<_> = samples.iter().skip(4).collect();
    if !settled.is_empty() {
        let spread = |f: fn(&(u64, u64, u64)) -> u64| {
            settled
                .iter()
                .fold((u64::MAX, 0), |(lo, hi), s| (lo.min(f(s)), hi.max(f(s))))
        };
        let (rlo, rhi) = spread(|s| s.0);
        let (flo, fhi) = spread(|s| s.1);
        let (wlo, whi) = spread(|s| s.2);
        println!(
            "soak after the first 2 min: RSS {rlo}-{rhi} MiB ({:+.0}%), fds {flo}-{fhi}, WAL {wlo}-{whi} MiB",
            (rhi as f64 / rlo.max(1) as f64 - 1.0) * 100.0
        );
    }
}
