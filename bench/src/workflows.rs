//! `workflows`: 10,000 executions waiting on DELAY timers that fall due together (the
//! clock moved past them at once), with /v1/track beside them; then the cost of
//! triggers on /v1/track: 10,000 events that each start an execution, against 10,000
//! that start none, on the same server.

use std::path::Path;
use std::time::{Duration, Instant};

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::{json, Value};

use crate::scenario::Scenario;
use crate::server::Server;
use crate::{client, members, report, setup};

const ADMIN: &str = "bench-admin-token-0123456789abcdefghijklmnopq";

fn delayed(i: u64) -> String {
    format!(r#"{{"email":"d{i}@bench.example.com","event":"wf-delay","subscribed":true}}"#)
}

/// Which round of the trigger comparison runs: every round tracks new contacts.
static ROUND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn round() -> u64 {
    ROUND.load(std::sync::atomic::Ordering::Relaxed)
}

fn triggering(i: u64) -> String {
    format!(
        r#"{{"email":"t{}-{i}@bench.example.com","event":"wf-go"}}"#,
        round()
    )
}

fn exiting(i: u64) -> String {
    format!(
        r#"{{"email":"x{}-{i}@bench.example.com","event":"wf-exit"}}"#,
        round()
    )
}

fn plain(i: u64) -> String {
    format!(
        r#"{{"email":"p{}-{i}@bench.example.com","event":"wf-none"}}"#,
        round()
    )
}

fn call(rt: &tokio::runtime::Runtime, s: &Server, method: &str, path: &str, body: Value) -> Value {
    let (status, v) = rt.block_on(client::call(
        s.addr(),
        method,
        path,
        Some(&s.secret_key),
        Some(body.to_string()),
    ));
    assert!(status < 300, "{method} {path}: {status} {v}");
    v
}

fn total(rt: &tokio::runtime::Runtime, s: &Server, workflow: &str, status: &str) -> u64 {
    let path = format!("/workflows/{workflow}/executions?status={status}&limit=1");
    let (code, v) = rt.block_on(client::call(
        s.addr(),
        "GET",
        &path,
        Some(&s.secret_key),
        None,
    ));
    // A failed read is an error of the scenario, never "0 of n past their timers".
    assert_eq!(code, 200, "GET {path}: {v}");
    v["total"]
        .as_u64()
        .unwrap_or_else(|| panic!("GET {path}: no total in {v}"))
}

fn workflow(rt: &tokio::runtime::Runtime, s: &Server, trigger: &str, steps: Value) -> String {
    let w = call(
        rt,
        s,
        "POST",
        "/workflows",
        json!({"name": trigger, "triggerEvent": trigger,
        "enabled": true, "steps": steps}),
    );
    w["id"].as_str().unwrap_or_default().to_owned()
}

pub fn run(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    dns: &TestDns,
    smtp_connections: usize,
    n: u64,
    profile: Option<&Path>,
) {
    let smtp = SmtpServer::start();
    smtp.count_only();
    let mut env = setup::env(dns, &smtp, 0, smtp_connections);
    env.push(("MAILROOM__CLOCK__ADJUSTABLE".into(), "true".into()));
    env.push(("MAILROOM__ADMIN__TOKEN".into(), ADMIN.into()));
    let server = Server::start(bin, &env);
    setup::verify_domain(rt, &server, dns);
    let t = call(
        rt,
        &server,
        "POST",
        "/templates",
        json!({"name": "Later", "subject": "Later",
        "body": "<p>Later {{email}}</p>", "type": "TRANSACTIONAL", "from": format!("bench@{}", setup::DOMAIN)}),
    );
    let template = t["id"].as_str().unwrap_or_default().to_owned();
    let w = workflow(
        rt,
        &server,
        "wf-delay",
        json!([
        {"id": "wait", "type": "DELAY", "config": {"amount": 60, "unit": "seconds"}, "next": "send"},
        {"id": "send", "type": "SEND_EMAIL", "config": {"templateId": template}, "next": null}]),
    );
    let took = members::post_many(rt, &server, "/v1/track", n, 32, delayed);
    let deadline = Instant::now() + Duration::from_secs(120);
    while total(rt, &server, &w, "WAITING") < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "workflows: {n} executions started by /v1/track in {:.1} s; {} waiting on a 60 s DELAY",
        took.as_secs_f64(),
        total(rt, &server, &w, "WAITING")
    );
    let track = rt.spawn(client::run(
        server.addr(),
        Scenario::Track.prepare(&server),
        8,
        Duration::from_millis(200),
        Duration::from_secs(8),
    ));
    let before = smtp.count();
    let started = Instant::now();
    let (status, _) = rt.block_on(client::call(
        server.addr(),
        "POST",
        "/admin/clock/advance",
        Some(ADMIN),
        Some(json!({"ms": 61_000}).to_string()),
    ));
    assert_eq!(status, 200, "moving the clock");
    // After the /v1/track load beside the timers ends: the timers alone.
    let recording =
        profile.map(|dir| crate::profile::record_after(dir, "sled-timers", server.pid(), 9, 6));
    // Ended executions are kept up to `workflows.max_finished_executions`, so count
    // what has not ended yet.
    let deadline = started + Duration::from_secs(120);
    let mut left = n;
    while Instant::now() < deadline {
        left = total(rt, &server, &w, "WAITING") + total(rt, &server, &w, "RUNNING");
        if left == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let secs = started.elapsed().as_secs_f64();
    let done = n - left;
    if let Some(recording) = recording {
        recording.finish();
    }
    let track = report::Report::new(
        "POST /v1/track while due",
        rt.block_on(track).expect("track load"),
        server.peak_rss_kib(),
    );
    println!(
        "workflows: {done} of {n} executions past their timers with their emails queued in {secs:.2} s after the clock passed them ({} delivered by then)",
        smtp.count() - before
    );
    // The issue's yardstick: the time to sign as many emails on one core.
    let signing = crate::campaign::signatures_per_1000() * n as f64 / 1000.0;
    println!(
        "workflows: {secs:.2} s = {:.2}x the time to sign {n} emails on one core ({signing:.2} s; goal: 1.5x)",
        secs / signing.max(0.001)
    );
    track.print();
    // The cost of triggers on /v1/track: fresh contacts either way, so the only
    // difference is the execution each event starts. Three rounds each, interleaved,
    // medians compared (10,000 requests take well under a second).
    workflow(
        rt,
        &server,
        "wf-go",
        json!([
        {"id": "wait", "type": "DELAY", "config": {"amount": 1, "unit": "days"}, "next": null}]),
    );
    workflow(
        rt,
        &server,
        "wf-exit",
        json!([{"id": "bye", "type": "EXIT", "config": {}}]),
    );
    let conns = 64;
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..3 {
        ROUND.store(r, std::sync::atomic::Ordering::Relaxed);
        a.push(rate(members::post_many(
            rt,
            &server,
            "/v1/track",
            n,
            conns,
            plain,
        )));
        b.push(rate(members::post_many(
            rt,
            &server,
            "/v1/track",
            n,
            conns,
            triggering,
        )));
        c.push(rate(members::post_many(
            rt,
            &server,
            "/v1/track",
            n,
            conns,
            exiting,
        )));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (a, b, c) = (median(&mut a), median(&mut b), median(&mut c));
    println!(
        "workflows: /v1/track of {n} new contacts (medians of 3): {a:.0} req/s with no workflow; {b:.0} req/s when each event starts an execution that begins with a DELAY ({:.1}% less); {c:.0} req/s when each starts one the executor must run at once (an EXIT step: {:.1}% less)",
        (1.0 - b / a) * 100.0,
        (1.0 - c / a) * 100.0
    );
    println!(
        "workflows: server peak RSS {} MiB",
        server.peak_rss_kib() / 1024
    );
}
