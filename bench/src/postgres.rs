//! The PostgreSQL pass (`--postgres-url`): a fresh schema per run, and each scenario's
//! throughput beside sled's.

use std::process::Command;

use crate::report::Report;

/// The server settings for storage.backend = "postgres" in a new schema, made with psql.
pub fn env(admin: &str) -> Vec<(String, String)> {
    let schema = format!(
        "bench_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    );
    let made = Command::new("psql")
        .args(["-v", "ON_ERROR_STOP=1", "-qAt", "-d", admin, "-c"])
        .arg(format!("CREATE SCHEMA {schema}"))
        .output()
        .expect("run psql (PostgreSQL's client) to make the bench's schema");
    assert!(
        made.status.success(),
        "creating schema {schema}: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let sep = if admin.contains('?') { '&' } else { '?' };
    vec![
        (
            "MAILROOM__STORAGE__BACKEND".to_owned(),
            "postgres".to_owned(),
        ),
        (
            "MAILROOM__STORAGE__POSTGRES__URL".to_owned(),
            format!("{admin}{sep}options=-c%20search_path%3D{schema}"),
        ),
    ]
}

/// PostgreSQL's throughput as a share of sled's, scenario by scenario.
pub fn compare(sled: &[Report], postgres: &[Report]) {
    for p in postgres {
        if let Some(s) = sled.iter().find(|s| s.name == p.name) {
            println!(
                "{:<28} postgres {:>8.0} req/s = {:>5.1}% of sled's {:>8.0} req/s (p99 {:.2} ms vs {:.2} ms)",
                p.name,
                p.per_second,
                100.0 * p.per_second / s.per_second.max(1.0),
                s.per_second,
                p.p99_ms,
                s.p99_ms
            );
        }
    }
}
