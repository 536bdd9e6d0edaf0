//! Printing results.

use crate::client::Load;

pub struct Report {
    pub name: &'static str,
    pub requests: usize,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
    pub peak_rss_mib: u64,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

impl Report {
    pub fn new(name: &'static str, mut load: Load, peak_rss_kib: u64) -> Report {
        load.latencies_us.sort_unstable();
        if let Some(e) = &load.first_error {
            eprintln!("{name}: {} errors; first: {e}", load.errors);
        }
        let l = &load.latencies_us;
        Report {
            name,
            requests: l.len(),
            per_second: l.len() as f64 / load.elapsed.as_secs_f64(),
            p50_ms: percentile(l, 0.50),
            p99_ms: percentile(l, 0.99),
            max_ms: l.last().map_or(0.0, |m| *m as f64 / 1000.0),
            errors: load.errors,
            peak_rss_mib: peak_rss_kib / 1024,
        }
    }

    pub fn print(&self) {
        println!(
            "{:<28} {:>9.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms  errors {:>4}  requests {:>8}  server peak RSS {} MiB",
            self.name, self.per_second, self.p50_ms, self.p99_ms, self.max_ms, self.errors, self.requests, self.peak_rss_mib
        );
    }
}

/// Each scenario's throughput as a share of the baseline's, measured in the same run.
pub fn print_ratios(results: &[Report]) {
    let Some(base) = results.iter().find(|r| r.name.starts_with("baseline")) else {
        return;
    };
    for r in results.iter().filter(|r| !r.name.starts_with("baseline")) {
        println!(
            "{:<28} {:>5.1}% of baseline throughput (p99 {:.2} ms)",
            r.name,
            100.0 * r.per_second / base.per_second.max(1.0),
            r.p99_ms
        );
    }
}
