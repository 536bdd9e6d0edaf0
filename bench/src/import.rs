//! `import`: N new contacts in one CSV through POST /contacts/import, timed from the upload
//! to COMPLETED (the goal: 100,000 rows in under 10 s).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::client;
use crate::server::Server;

pub fn run(rt: &tokio::runtime::Runtime, server: &Server, rows: u64) {
    let done = import(rt, server.addr(), &server.secret_key, rows);
    let (last, took) = (&done.last, done.took.as_secs_f64());
    // The rate of an import that failed or gave up is no figure at all.
    assert_eq!(
        last["status"], "COMPLETED",
        "import: the job did not complete: {last}"
    );
    println!(
        "import: {rows} rows ({} MiB) answered 202 in {:.2} s, {} in {took:.2} s = {:.0} rows/s (created {}, rejected {})",
        done.bytes / (1 << 20),
        done.accepted.as_secs_f64(),
        last["status"],
        rows as f64 / took,
        last["created"],
        last["rejected"].as_array().map_or(0, Vec::len)
    );
    println!(
        "import: server peak RSS {} MiB",
        server.peak_rss_kib() / 1024
    );
}

/// How an import went.
pub struct Imported {
    /// The CSV's size.
    pub bytes: usize,
    /// From the upload to its 202.
    pub accepted: Duration,
    /// From the upload to COMPLETED (or FAILED, or giving up after 10 minutes).
    pub took: Duration,
    /// The import's last state (`GET /contacts/imports/{id}`).
    pub last: serde_json::Value,
}

/// `rows` new contacts (`import<n>@example.com`) in one CSV through `addr`, waited for.
pub fn import(rt: &tokio::runtime::Runtime, addr: SocketAddr, key: &str, rows: u64) -> Imported {
    let mut csv = String::from("email,n:number,vip:boolean\n");
    for n in 0..rows {
        csv.push_str(&format!("import{n}@example.com,{n},{}\n", n % 2 == 0));
    }
    let bytes = csv.len();
    let auth = Some(key);
    let started = Instant::now();
    let (status, body) = rt.block_on(client::call_as(
        addr,
        "POST",
        "/contacts/import",
        auth,
        "text/csv",
        Some(csv),
    ));
    assert_eq!(status, 202, "starting the import: {body}");
    let accepted = started.elapsed();
    let path = format!(
        "/contacts/imports/{}",
        body["id"].as_str().unwrap_or_default()
    );
    let last = loop {
        let (_, v) = rt.block_on(client::call(addr, "GET", &path, auth, None));
        if ["COMPLETED", "FAILED"].contains(&v["status"].as_str().unwrap_or_default())
            || started.elapsed() > Duration::from_secs(600)
        {
            break v;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Imported {
        bytes,
        accepted,
        took: started.elapsed(),
        last,
    }
}
