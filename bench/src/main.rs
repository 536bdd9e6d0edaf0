//! The Mailroom load generator. It starts the release server on a temporary data
//! directory, drives it over HTTP/1.1 keep-alive connections for a fixed time per
//! scenario, and prints throughput, latency percentiles and the server's peak RSS.
//!
//!     cargo build --release && cargo run --release -p mailroom-bench -- --connections 64 --seconds 10
//!
//! The baseline scenario is `GET /health`, a handler that returns a constant through the
//! same middleware stack, so the ratio printed for each scenario is the cost of its work.

mod client;
mod report;
mod scenario;
mod server;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

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
    /// Scenarios to run, comma-separated: baseline, contacts.
    #[arg(long, default_value = "baseline,contacts", value_delimiter = ',')]
    scenarios: Vec<String>,
    /// The server binary (default: target/release/mailroom under CARGO_TARGET_DIR or ./target).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Client threads. One keeps most of the 2-core machine for the server.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
}

fn main() {
    let args = Args::parse();
    let bin = args.server_bin.clone().unwrap_or_else(server::default_bin);
    let scenarios: Vec<Scenario> = args
        .scenarios
        .iter()
        .map(|s| Scenario::parse(s).unwrap_or_else(|| panic!("unknown scenario {s}")))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = server::Server::start(&bin);
    println!(
        "mailroom bench: {} connections, {} s per scenario, server {} (pid {})",
        args.connections,
        args.seconds,
        bin.display(),
        server.pid()
    );
    let mut results = Vec::new();
    for s in &scenarios {
        let ctx = s.prepare(&server);
        let load = rt.block_on(client::run(
            server.addr(),
            ctx,
            args.connections,
            Duration::from_secs(1),
            Duration::from_secs(args.seconds),
        ));
        let r = report::Report::new(s.name(), load, server.peak_rss_kib());
        r.print();
        results.push(r);
    }
    report::print_ratios(&results);
    println!("server peak RSS: {} MiB", server.peak_rss_kib() / 1024);
}
