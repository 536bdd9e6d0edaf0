//! The Mailroom load generator. It starts the release server on a temporary data
//! directory, with a real SMTP server and DNS server of its own on loopback, drives it
//! over HTTP/1.1 keep-alive connections for a fixed time per scenario, and prints
//! throughput, latency percentiles and the server's peak RSS.
//!
//!     cargo build --release && cargo run --release -p mailroom-bench -- --connections 64 --seconds 10
//!
//! The baseline scenario is `GET /health`, a handler that returns a constant through the
//! same middleware stack, so the ratio printed for each scenario is the cost of its work.

mod campaign;
mod client;
mod failover;
mod feedback;
mod footprint;
mod import;
mod members;
mod postgres;
mod profile;
mod report;
mod scenario;
mod server;
mod setup;
mod smtp_client;
mod soak;
mod webhooks;
mod workflows;
mod wrk;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use mailroom_testkit::{SmtpServer, TestDns};

use scenario::Scenario;

#[derive(Debug, Parser)]
#[command(name = "loadgen", about = "Mailroom load generator")]
pub struct Args {
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds of load per scenario (after a 1 s warm-up).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Scenarios, comma-separated: baseline, contacts, track, verify, send, smtp (reference
    /// SMTP clients), paced (60 s of delivery at 14/s), members (memberCount over --contacts),
    /// campaign (a campaign to --recipients drains, /v1/track beside it), workflows
    /// (10,000 timers due at once; the cost of triggers on /v1/track), soak (a mixed load
    /// for --soak-minutes, sampled every 30 s), import (--contacts rows through POST
    /// /contacts/import, timed to COMPLETED), footprint (--contacts through POST /contacts,
    /// then a restart: RSS per contact and the project's load time), feedback (/v1/send with a return path per email beside without, and delivery reports/s through the receiving SMTP server), webhooks (/v1/track
    /// with an endpoint subscribed to * beside none, and deliveries/s to a local
    /// receiver), wrk (/v1/track and the upsert under `wrk -t2 -c64`, each as a share
    /// of /health under the same wrk: issue #35's first two figures), failover (needs
    /// --postgres-url: two nodes, --contacts imported, kill -9 of the owner, the time
    /// until the other node serves the project).
    #[arg(
        long,
        default_value = "baseline,contacts,track,verify,send,smtp",
        value_delimiter = ','
    )]
    scenarios: Vec<String>,
    /// The server binary (default: target/release/mailroom under CARGO_TARGET_DIR or ./target).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Client threads. One keeps most of the 2-core machine for the server.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// SMTP connections Mailroom may use (mailer.workers x smtp.pool_size), and the bare
    /// client's connection count in the reference figure.
    #[arg(long, default_value_t = 32)]
    smtp_connections: usize,
    /// Contacts loaded for the `members`, `footprint` and `failover` scenarios, and rows
    /// of the `import` one.
    #[arg(long, default_value_t = 100_000)]
    contacts: u64,
    /// Subscribed contacts the `campaign` scenario sends to.
    #[arg(long, default_value_t = 100_000)]
    recipients: u64,
    /// Minutes of the `soak` scenario.
    #[arg(long, default_value_t = 10)]
    soak_minutes: u64,
    /// Addresses the soak's upserts and sends go to; 0 = a new one for every send and
    /// every other upsert (the data set grows).
    #[arg(long, default_value_t = 0)]
    soak_contacts: u64,
    /// Further restarts of the `footprint` scenario on the same data, each timing the
    /// project's load again; they alternate --compare-bin and the server binary.
    #[arg(long, default_value_t = 0)]
    restarts: usize,
    /// Another server binary for the `footprint` restarts (an A/B of the load time).
    #[arg(long)]
    compare_bin: Option<PathBuf>,
    /// Hours the soak moves the server's clock after each 30-s sample, with retention
    /// shortened to a day; 0 = the real clock and the default retention.
    #[arg(long, default_value_t = 0)]
    soak_clock_hours: u64,
    /// A PostgreSQL URL (a role that may create schemas): the baseline, contacts, track
    /// and send scenarios then run a second time on a server with storage.backend =
    /// "postgres", in a fresh schema, beside the sled figures.
    #[arg(long)]
    postgres_url: Option<String>,
    /// cluster.lease_seconds of the `failover` scenario's nodes.
    #[arg(long, default_value_t = 10)]
    lease_seconds: u64,
    /// Records the server with `perf record -g` (Debian's linux-perf) during each core
    /// scenario's load (and the campaign's drain and the due timers, once the /v1/track
    /// load beside them ends, and the segment count), into DIR/<scenario>.perf.data, and, when `inferno-collapse-perf`
    /// and `inferno-flamegraph` are on the PATH (`cargo install inferno`), draws
    /// DIR/<scenario>.svg. Give --server-bin a release build with frame pointers
    /// (docs/performance.md, "Hot paths") for whole stacks.
    #[arg(long)]
    profile: Option<PathBuf>,
}

/// The scenarios `core` runs, on sled and (with --postgres-url) on PostgreSQL.
const CORE: [&str; 5] = ["baseline", "contacts", "track", "verify", "send"];

fn main() {
    let args = Args::parse();
    let bin = args.server_bin.clone().unwrap_or_else(server::default_bin);
    let wanted = |s: &str| args.scenarios.iter().any(|x| x == s);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dns = TestDns::start();
    let smtp = SmtpServer::start();
    smtp.count_only();
    dns.add_mail_domain("gmail.com");
    let env = setup::env(&dns, &smtp, 0, args.smtp_connections);
    let mut send_drained = None;
    if CORE.iter().any(|s| wanted(s)) {
        send_drained = core_on_both(&args, &rt, &bin, &dns, &smtp, &env);
    }
    if wanted("smtp") {
        let addr = smtp.addr();
        let secs = 3.0;
        let one_nagle = rt.block_on(smtp_client::rate(addr, 1, false, secs));
        let one = rt.block_on(smtp_client::rate(addr, 1, true, secs));
        let same = rt.block_on(smtp_client::rate(addr, args.smtp_connections, true, secs));
        let ceiling = rt.block_on(smtp_client::ceiling(addr, args.smtp_connections, secs));
        println!("bare SMTP client, 1 connection, Nagle on (lettre's default socket): {one_nagle:>8.0} emails/s");
        println!("bare SMTP client, 1 connection, TCP_NODELAY (what Mailroom's mailers use): {one:>8.0} emails/s");
        println!(
            "bare SMTP client, {} connections, TCP_NODELAY: {same:>8.0} emails/s",
            args.smtp_connections
        );
        println!(
            "SMTP server ceiling ({} connections, {} transactions pipelined per write): {ceiling:>8.0} emails/s",
            args.smtp_connections,
            smtp_client::PIPELINED
        );
    }
    if wanted("members") {
        let fresh = server::Server::start(&bin, &setup::env(&dns, &smtp, 0, args.smtp_connections));
        members::run(
            &rt,
            &fresh,
            args.contacts,
            args.connections,
            args.profile.as_deref(),
        );
    }
    if wanted("campaign") {
        campaign::run(
            &rt,
            &bin,
            &dns,
            args.smtp_connections,
            args.recipients,
            send_drained,
            args.profile.as_deref(),
        );
    }
    if wanted("workflows") {
        workflows::run(
            &rt,
            &bin,
            &dns,
            args.smtp_connections,
            10_000,
            args.profile.as_deref(),
        );
    }
    if wanted("soak") {
        soak::run(
            &rt,
            &bin,
            &dns,
            args.smtp_connections,
            args.soak_minutes,
            args.soak_contacts,
            args.soak_clock_hours,
        );
    }
    if wanted("footprint") {
        footprint::run(&rt, &bin, &dns, &args);
    }
    if wanted("import") {
        let fresh = server::Server::start(&bin, &setup::env(&dns, &smtp, 0, args.smtp_connections));
        import::run(&rt, &fresh, args.contacts);
    }
    if wanted("paced") {
        paced(&rt, &bin, &dns, args.smtp_connections);
    }
    if wanted("feedback") {
        feedback::run(
            &rt,
            &bin,
            &dns,
            args.smtp_connections,
            args.connections,
            args.seconds,
        );
    }
    if wanted("webhooks") {
        webhooks::run(&rt, &bin, &env, args.connections, args.seconds);
    }
    if wanted("wrk") {
        let fresh = server::Server::start(&bin, &setup::env(&dns, &smtp, 0, args.smtp_connections));
        wrk::run(&fresh, args.seconds);
    }
    if wanted("failover") {
        let url = args
            .postgres_url
            .as_deref()
            .expect("the failover scenario needs --postgres-url");
        failover::run(&rt, &bin, &env, url, args.contacts, args.lease_seconds);
    }
}

/// The core scenarios on sled, then (with --postgres-url) on PostgreSQL beside them;
/// answers the drained delivery rate of `send` on sled.
fn core_on_both(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    dns: &TestDns,
    smtp: &SmtpServer,
    env: &[(String, String)],
) -> Option<f64> {
    let (server, results, send_drained) = core(args, rt, bin, dns, smtp, "sled", env);
    report::print_ratios(&results);
    if let Some(url) = &args.postgres_url {
        // One server at a time on the two cores.
        println!(
            "server peak RSS (sled): {} MiB",
            server.peak_rss_kib() / 1024
        );
        drop(server);
        let mut env = env.to_vec();
        env.extend(postgres::env(url));
        let (pg, pg_results, _) = core(args, rt, bin, dns, smtp, "postgres", &env);
        report::print_ratios(&pg_results);
        postgres::compare(&results, &pg_results);
        println!(
            "server peak RSS (postgres): {} MiB",
            pg.peak_rss_kib() / 1024
        );
    } else {
        println!("server peak RSS: {} MiB", server.peak_rss_kib() / 1024);
        drop(server);
    }
    send_drained
}

/// The core scenarios on one server: its results, the server (still running) and the
/// drained delivery rate of `send`.
fn core(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    dns: &TestDns,
    smtp: &SmtpServer,
    backend: &str,
    env: &[(String, String)],
) -> (server::Server, Vec<report::Report>, Option<f64>) {
    let wanted = |s: &str| args.scenarios.iter().any(|x| x == s);
    let server = server::Server::start(bin, env);
    setup::verify_domain(rt, &server, dns);
    println!(
        "mailroom bench on {backend}: {} connections, {} s per scenario, server {} (pid {})",
        args.connections,
        args.seconds,
        bin.display(),
        server.pid()
    );
    let mut results = Vec::new();
    let mut send_drained = None;
    for name in CORE.into_iter().filter(|s| wanted(s)) {
        let s = Scenario::parse(name).expect("known scenario");
        let before = smtp.count();
        let started = Instant::now();
        let ctx = s.prepare(&server);
        // The recording starts after the 1 s warm-up and covers the measured seconds.
        let recording = args.profile.as_deref().map(|dir| {
            profile::record(
                dir,
                &format!("{backend}-{name}"),
                server.pid(),
                args.seconds,
            )
        });
        let load = rt.block_on(client::run(
            server.addr(),
            ctx,
            args.connections,
            Duration::from_secs(1),
            Duration::from_secs(args.seconds),
        ));
        if let Some(recording) = recording {
            recording.finish();
        }
        let r = report::Report::new(s.name(), load, server.peak_rss_kib());
        r.print();
        if s == Scenario::Send {
            send_drained = Some(report_delivery(smtp, before, started, args.seconds));
        }
        results.push(r);
    }
    (server, results, send_drained)
}

/// Accepted emails are counted again at the SMTP server: during the measured run, and
/// until the outbox has drained.
/// Answers the drained rate (emails/s).
fn report_delivery(smtp: &SmtpServer, before: u64, started: Instant, seconds: u64) -> f64 {
    let during = smtp.count() - before;
    let window = started.elapsed().as_secs_f64();
    println!(
        "POST /v1/send end to end: {:.0} emails/s delivered to the SMTP server while loading ({during} in {window:.1} s, pacing off)",
        during as f64 / window
    );
    let drained = Instant::now();
    let mut last = smtp.count();
    while drained.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
        let now = smtp.count();
        if now == last {
            break;
        }
        last = now;
    }
    let total = last - before;
    let secs = started.elapsed().as_secs_f64() - 0.5;
    println!(
        "POST /v1/send drained: {total} emails delivered in {secs:.1} s from the first request = {:.0} emails/s (load {seconds} s + 1 s warm-up)",
        total as f64 / secs
    );
    total as f64 / secs
}

/// Pacing at 14 a second: queue plenty, then watch 60 s of deliveries.
fn paced(
    rt: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    dns: &TestDns,
    smtp_connections: usize,
) {
    let smtp = SmtpServer::start();
    let server = server::Server::start(bin, &setup::env(dns, &smtp, 14, smtp_connections));
    setup::verify_domain(rt, &server, dns);
    let total = 14 * 60 + 200;
    let ctx = Scenario::Send.prepare(&server);
    rt.block_on(async {
        for n in 0..total as u64 {
            let r = ctx.request(0, n);
            let (status, _) = client::call(
                server.addr(),
                r.method,
                r.path,
                Some(&server.secret_key),
                r.body,
            )
            .await;
            assert_eq!(status, 200, "queueing for the paced run");
        }
    });
    println!(
        "paced: {total} emails queued; watching 60 s of delivery at sending.rate_per_second = 14"
    );
    std::thread::sleep(Duration::from_secs(62));
    let times: Vec<Instant> = smtp.received().iter().map(|m| m.at).collect();
    let Some(&first) = times.first() else {
        println!("paced: nothing was delivered");
        return;
    };
    let in_window: Vec<f64> = times
        .iter()
        .map(|t| t.duration_since(first).as_secs_f64())
        .filter(|t| *t < 60.0)
        .collect();
    let mut max_in_any_second = 0;
    for (i, start) in in_window.iter().enumerate() {
        let n = in_window[i..]
            .iter()
            .take_while(|t| **t < start + 1.0)
            .count();
        max_in_any_second = max_in_any_second.max(n);
    }
    println!(
        "paced: {:.2} emails/s over 60 s ({} delivered), at most {max_in_any_second} in any one-second window",
        in_window.len() as f64 / 60.0,
        in_window.len()
    );
}
