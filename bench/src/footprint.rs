//! `footprint`: what a project of `--contacts` contacts costs in memory, and how long it
//! takes to load at start-up. It loads the contacts through POST /contacts, stops the
//! server (SIGTERM), starts it again on the same data, and times the first request that
//! needs the project (an upsert, which waits for the project's actor to load its contact
//! table). Bytes per contact are the server's RSS after that request less its RSS before
//! it, over the contacts; the server's own log line gives the load time it measured.

use std::path::Path;
use std::time::{Duration, Instant};

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::json;

use crate::server::Server;
use crate::{client, members, setup};

pub fn run(rt: &tokio::runtime::Runtime, bin: &Path, dns: &TestDns, args: &crate::Args) {
    let (contacts, restarts) = (args.contacts, args.restarts);
    let (smtp_connections, connections) = (args.smtp_connections, args.connections);
    let compare = args.compare_bin.as_deref();
    let smtp = SmtpServer::start();
    smtp.count_only();
    let env = setup::env(dns, &smtp, 0, smtp_connections);
    let mut server = Server::start(bin, &env);
    let empty = server.rss_kib();
    let took = members::post_many(
        rt,
        &server,
        "/contacts",
        contacts,
        connections,
        members::member,
    );
    println!(
        "footprint: {contacts} contacts loaded through POST /contacts in {:.1} s ({:.0}/s); RSS {} MiB (empty server {} MiB), peak {} MiB",
        took.as_secs_f64(),
        contacts as f64 / took.as_secs_f64(),
        server.rss_kib() / 1024,
        empty / 1024,
        server.peak_rss_kib() / 1024
    );

    let log = server.data_dir().with_file_name("restart.log");
    let mut env = env;
    env.push(("MAILROOM__LOG__LEVEL".into(), "info".into()));
    restart_and_load(rt, &mut server, bin, &env, &log, contacts);
    members::count(rt, &server, contacts, None);
    // A/B on the same data: each further restart alternates `compare` and `bin`.
    for i in 0..restarts {
        let which = match (compare, i % 2) {
            (Some(other), 0) => other,
            _ => bin,
        };
        println!("footprint: restart {} with {}", i + 2, which.display());
        restart_and_load(rt, &mut server, which, &env, &log, contacts);
    }
}

/// Restarts the server with `bin` on its data and times the first request that needs
/// the project; prints the times, RSS and the server's own load line.
fn restart_and_load(
    rt: &tokio::runtime::Runtime,
    server: &mut Server,
    bin: &Path,
    env: &[(String, String)],
    log: &Path,
    contacts: u64,
) {
    let restarted = Instant::now();
    server.restart(bin, env, log);
    let listening = restarted.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    let idle = server.rss_kib();
    let first = Instant::now();
    let upsert = json!({"email": "m0@bench.example.com", "data": {"seen": true}}).to_string();
    let (status, body) = rt.block_on(client::call(
        server.addr(),
        "POST",
        "/contacts",
        Some(&server.secret_key),
        Some(upsert),
    ));
    assert!(
        (200..300).contains(&status),
        "the first upsert after the restart: {status} {body}"
    );
    let answered = first.elapsed();
    let loaded = server.rss_kib();
    let logged = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .find(|l| l.contains("loaded the project's contacts into memory"))
        .map(|l| l.to_owned())
        .unwrap_or_else(|| "(no load line in the log)".to_owned());
    println!(
        "footprint: restart listening after {:.2} s; the first upsert (which loads the project) answered after {:.2} s; RSS {} MiB before it, {} MiB after: {:.0} bytes per contact",
        listening.as_secs_f64(),
        answered.as_secs_f64(),
        idle / 1024,
        loaded / 1024,
        (loaded.saturating_sub(idle) * 1024) as f64 / contacts as f64
    );
    println!("footprint: server log: {}", logged.trim());
}
