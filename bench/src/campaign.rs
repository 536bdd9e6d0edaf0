//! `campaign`: a campaign to N subscribed contacts (pacing off, DKIM on) drains to the
//! SMTP server, while /v1/track runs beside it. Prints the drain rate (and its ratio to
//! the /v1/send drain of the same run), /v1/track's latency during the drain, the
//! server's peak RSS, and its CPU seconds per 1,000 emails beside the cost of 1,000 DKIM
//! signatures measured here.

use std::path::Path;
use std::time::{Duration, Instant};

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::json;

use crate::scenario::Scenario;
use crate::server::Server;
use crate::{client, members, report, setup};

fn subscriber(i: u64) -> String {
    format!(r#"{{"email":"c{i}@bench.example.com","subscribed":true,"data":{{"name":"C{i}"}}}}"#)
}

/// The server's CPU time so far (user + system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name; Linux
    // counts them in USER_HZ, 100 a second.
    (ticks(11) + ticks(12)) / 100.0
}

/// Seconds one core takes for 1,000 DKIM signatures of a message like the campaign's,
/// with the engine's own signer.
pub(crate) fn signatures_per_1000() -> f64 {
    let message = format!(
        "From: Bench <bench@{d}>\r\nTo: c1@bench.example.com\r\nSubject: Hello C1\r\n\
         Date: Tue, 24 Nov 2026 10:00:00 +0000\r\nMessage-ID: <x@{d}>\r\n\
         Content-Type: text/html; charset=utf-8\r\n\r\n<p>Hello C1</p>{}\r\n",
        "<p>unsubscribe and pixel links of about this size</p>".repeat(8),
        d = setup::DOMAIN
    );
    mailroom_actors::engine::ops::time_dkim_signatures(message.as_bytes(), setup::DOMAIN, 1_000)
        .expect("1,000 signatures")
        .as_secs_f64()
}

pub fn run(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    dns: &TestDns,
    smtp_connections: usize,
    recipients: u64,
    send_drained: Option<f64>,
    profile: Option<&Path>,
) {
    let smtp = SmtpServer::start();
    smtp.count_only();
    let server = Server::start(bin, &setup::env(dns, &smtp, 0, smtp_connections));
    setup::verify_domain(rt, &server, dns);
    let loading = Instant::now();
    members::load_contacts(rt, &server, recipients, 32, subscriber);
    println!(
        "campaign: {recipients} subscribed contacts loaded in {:.1} s",
        loading.elapsed().as_secs_f64()
    );
    let key = Some(server.secret_key.as_str());
    let body = json!({"name": "Bench", "subject": "Hello {{name ?? \"there\"}}",
        "body": "<p>Hello {{name ?? \"there\"}}</p><p><a href=\"https://example.com/offer\">offer</a></p>",
        "from": format!("bench@{}", setup::DOMAIN), "fromName": "Bench", "type": "ALL"});
    let (status, c) = rt.block_on(client::call(
        server.addr(),
        "POST",
        "/campaigns",
        key,
        Some(body.to_string()),
    ));
    assert_eq!(status, 201, "creating the campaign: {c}");
    let path = format!(
        "/campaigns/{}/send",
        c["data"]["id"].as_str().unwrap_or_default()
    );
    let before = smtp.count();
    let cpu_before = cpu_seconds(server.pid());
    let started = Instant::now();
    let (status, sent) = rt.block_on(client::call(server.addr(), "POST", &path, key, None));
    assert_eq!(status, 200, "sending the campaign: {sent}");
    // After the /v1/track load beside the drain ends: the drain alone.
    let recording =
        profile.map(|dir| crate::profile::record_after(dir, "sled-campaign", server.pid(), 11, 8));
    // /v1/track beside the drain: 8 connections for 10 s.
    let track = rt.spawn(client::run(
        server.addr(),
        Scenario::Track.prepare(&server),
        8,
        Duration::from_millis(500),
        Duration::from_secs(10),
    ));
    let deadline = started + Duration::from_secs(900);
    while smtp.count() - before < recipients && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(server.pid()) - cpu_before;
    if let Some(recording) = recording {
        recording.finish();
    }
    let delivered = smtp.count() - before;
    let rate = delivered as f64 / secs;
    let track = report::Report::new(
        "POST /v1/track during drain",
        rt.block_on(track).expect("track load"),
        server.peak_rss_kib(),
    );
    println!(
        "campaign: {delivered} of {recipients} emails delivered in {secs:.1} s from POST /send = {rate:.0} emails/s (pacing off, DKIM on)"
    );
    if let Some(send) = send_drained {
        println!(
            "campaign drain / POST /v1/send drain (same run): {rate:.0} / {send:.0} = {:.2}",
            rate / send
        );
    }
    track.print();
    let per_1000 = cpu / delivered.max(1) as f64 * 1000.0;
    let signing = signatures_per_1000();
    println!(
        "campaign: server CPU {cpu:.1} s = {per_1000:.2} CPU s per 1,000 emails; 1,000 DKIM signatures take {signing:.2} s of one core here ({:.0}% of the cost): an email costs {:.2} signatures' worth (#35 goal: 1.3)",
        signing / per_1000 * 100.0,
        per_1000 / signing.max(f64::MIN_POSITIVE)
    );
    println!(
        "campaign: server peak RSS {} MiB",
        server.peak_rss_kib() / 1024
    );
}
