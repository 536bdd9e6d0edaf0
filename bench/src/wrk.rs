//! `wrk`: the first two figures of the hot-path table as issue #35 defines them:
//! `POST /v1/track` and the durable upsert (`POST /contacts`), each under
//! `wrk -t2 -c64` (Debian's `wrk`), as a share of `GET /health` under the same `wrk` in
//! the same run. `loadgen`'s own client is one thread, which `/health` saturates; `wrk`
//! drives more, so these shares are not flattered by the client. Each request has a
//! body of its own (a Lua script numbers them per `wrk` thread), and any answer that is
//! not a 2xx fails the scenario.

use std::path::Path;
use std::process::Command;

use crate::server::Server;

/// What one `wrk` run measured.
struct Run {
    per_second: f64,
    not_ok: u64,
    errors: String,
}

/// `body` is a Lua expression over `id` (the wrk thread) and `n` (its request count).
fn script(path: &str, key: &str, body: &str) -> String {
    format!(
        r#"local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
function init(args)
  n = 0
end
request = function()
  n = n + 1
  return wrk.format("POST", "{path}", {{["Authorization"] = "Bearer {key}", ["Content-Type"] = "application/json"}}, {body})
end
"#
    )
}

fn wrk(url: &str, seconds: u64, script: Option<&Path>) -> Result<Run, String> {
    let mut cmd = Command::new("wrk");
    cmd.args(["-t2", "-c64", &format!("-d{seconds}s")]);
    if let Some(s) = script {
        cmd.arg("-s").arg(s);
    }
    let out = cmd
        .arg(url)
        .output()
        .map_err(|e| format!("wrk did not run ({e}): `apt-get install wrk`"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let per_second = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk's output: {text}"))?;
    let not_ok = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let errors = text
        .lines()
        .find(|l| l.trim().starts_with("Socket errors:"))
        .unwrap_or("")
        .trim()
        .to_owned();
    Ok(Run {
        per_second,
        not_ok,
        errors,
    })
}

/// Runs the three loads against `server` for `seconds` each and prints the shares.
pub fn run(server: &Server, seconds: u64) {
    let base = format!("http://{}", server.addr());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let track = dir.path().join("track.lua");
    let upsert = dir.path().join("upsert.lua");
    let key = &server.secret_key;
    let written = std::fs::write(
        &track,
        script(
            "/v1/track",
            key,
            r#"string.format('{"email":"user%d-%d@bench.example.com","event":"signed-in","data":{"n":%d}}', n % 50000, id, n)"#,
        ),
    )
    .and_then(|_| {
        std::fs::write(
            &upsert,
            script(
                "/contacts",
                key,
                r#"string.format('{"email":"wrk%d-%d@bench.example.com","data":{"plan":"pro","n":%d}}', n % 50000, id, n)"#,
            ),
        )
    });
    written.expect("the wrk scripts");
    let health = match wrk(&format!("{base}/health"), seconds, None) {
        Ok(r) => r,
        Err(e) => {
            println!("wrk: skipped: {e}");
            return;
        }
    };
    let mut failed = Vec::new();
    for (name, path, script) in [
        ("POST /v1/track (durable)", "/v1/track", &track),
        ("POST /contacts (upsert, durable)", "/contacts", &upsert),
    ] {
        let r = match wrk(&format!("{base}{path}"), seconds, Some(script)) {
            Ok(r) => r,
            Err(e) => {
                failed.push(format!("{name}: {e}"));
                continue;
            }
        };
        println!(
            "wrk -t2 -c64: {name:<34} {:>9.0} req/s = {:>5.1}% of GET /health's {:.0} req/s under the same wrk{}",
            r.per_second,
            100.0 * r.per_second / health.per_second.max(1.0),
            health.per_second,
            match path {
                "/v1/track" => " (#35 goal: 25%)",
                _ => " (#35: hold 30.7%)",
            }
        );
        if r.not_ok > 0 || !r.errors.is_empty() {
            failed.push(format!("{name}: {} answers not 2xx {}", r.not_ok, r.errors));
        }
    }
    assert!(failed.is_empty(), "wrk: {}", failed.join("; "));
}
