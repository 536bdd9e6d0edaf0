//! `soak`: a mixed load for `--soak-minutes` (default 10) on a fresh server (pacing off):
//! upserts, tracks that start a workflow execution (a one-hour DELAY, then SEND_EMAIL)
//! for new contacts, and sends, each on a few connections. Every 30 s it prints the
//! server's RSS, open descriptors, write-ahead-log size, the data directory's size and
//! each load's p99 over those 30 s; at the end, how much each moved after the first two
//! minutes, and RSS and disk against their values at minute 5.
//!
//! With `--soak-clock-hours H` the retention is shortened to a day (an hour for
//! idempotency keys) and the server's clock moves H hours after each sample (through
//! the admin API), so that what the load writes also expires during the run: the
//! steady state of a server whose retention keeps up with its load.

use std::path::Path;
use std::time::Duration;

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::json;

use crate::scenario::Scenario;
use crate::server::Server;
use crate::{client, report, setup};

const INTERVAL: Duration = Duration::from_secs(30);

/// The admin token of the soak's server (the admin API moves its clock).
const ADMIN_TOKEN: &str = "soak-admin-token-0123456789abcdef0123456789";

/// The bytes of every file under `path`.
fn tree_bytes(path: &Path) -> u64 {
    std::fs::read_dir(path).map_or(0, |d| {
        d.flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => tree_bytes(&e.path()),
                _ => e.metadata().map_or(0, |m| m.len()),
            })
            .sum()
    })
}

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
    clock_hours: u64,
) {
    let smtp = SmtpServer::start();
    smtp.count_only();
    let mut env = setup::env(dns, &smtp, 0, smtp_connections);
    if clock_hours > 0 {
        for (k, v) in [
            ("MAILROOM__CLOCK__ADJUSTABLE", "true"),
            ("MAILROOM__ADMIN__TOKEN", ADMIN_TOKEN),
            ("MAILROOM__RETENTION__EMAIL_CONTENT_DAYS", "1"),
            ("MAILROOM__RETENTION__EMAILS_DAYS", "1"),
            ("MAILROOM__RETENTION__EVENTS_DAYS", "1"),
            ("MAILROOM__RETENTION__EXECUTIONS_DAYS", "1"),
            ("MAILROOM__RETENTION__IDEMPOTENCY_HOURS", "1"),
        ] {
            env.push((k.to_owned(), v.to_owned()));
        }
    }
    let server = Server::start(bin, &env);
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
    let mut disks = Vec::new();
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
        let disk = tree_bytes(&server.data_dir()) / (1 << 20);
        if clock_hours > 0 {
            let (status, body) = rt.block_on(client::call(
                server.addr(),
                "POST",
                "/admin/clock/advance",
                Some(ADMIN_TOKEN),
                Some(json!({ "ms": clock_hours * 3_600_000 }).to_string()),
            ));
            assert_eq!(status, 200, "moving the clock: {body}");
        }
        println!(
            "soak {:>5} s: RSS {rss} MiB, fds {fds}, WAL {wal} MiB, sled {db} MiB, data dir {disk} MiB, p99 contacts {:.1} ms ({:.0}/s), track {:.1} ms ({:.0}/s), send {:.1} ms ({:.0}/s), delivered {}",
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
        disks.push(disk);
    }
    // Against minute 5 (the tenth sample): the largest move of RSS and of the disk since.
    if let (Some(&(rss5, _, _)), Some(&disk5)) = (samples.get(9), disks.get(9)) {
        let most = |xs: Vec<u64>, base: u64| {
            xs.into_iter()
                .map(|x| (x as f64 / base.max(1) as f64 - 1.0) * 100.0)
                .fold(0.0f64, |m, d| if d.abs() > m.abs() { d } else { m })
        };
        let rss_later: Vec<u64> = samples.iter().skip(10).map(|s| s.0).collect();
        let disk_later: Vec<u64> = disks.iter().skip(10).copied().collect();
        println!(
            "soak against minute 5: RSS {rss5} MiB then {}-{} MiB (largest move {:+.1}%), data dir {disk5} MiB then {}-{} MiB (largest move {:+.1}%)",
            rss_later.iter().min().unwrap_or(&rss5),
            rss_later.iter().max().unwrap_or(&rss5),
            most(rss_later.clone(), rss5),
            disk_later.iter().min().unwrap_or(&disk5),
            disk_later.iter().max().unwrap_or(&disk5),
            most(disk_later.clone(), disk5),
        );
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
