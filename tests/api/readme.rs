//! The README's walkthrough runs as written: its `sh` blocks, one after the other, in an
//! empty directory, with the built binary as `mailroom` on the PATH.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::app::bin;

/// The `sh` blocks of the README's "Walkthrough" section, in order.
fn walkthrough() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let section = readme
        .split("\n## Walkthrough\n")
        .nth(1)
        .expect("a Walkthrough section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() == "```sh" {
            let block: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .collect();
            blocks.push(block.join("\n"));
        }
    }
    blocks
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let blocks = walkthrough();
    assert!(blocks.len() >= 5, "the walkthrough's blocks: {blocks:#?}");
    if std::net::TcpListener::bind("127.0.0.1:8080").is_err() {
        panic!("the walkthrough uses port 8080, which something else holds: stop it and rerun");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bin_dir = Path::new(bin()).parent().expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("set -euo pipefail\n{}\n", blocks.join("\n"));
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The walkthrough uses the embedded defaults, as a newcomer would.
    for (k, _) in std::env::vars() {
        if k.starts_with("MAILROOM") {
            cmd.env_remove(k);
        }
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().expect("bash");
    let pgid = child.id();
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx.recv_timeout(Duration::from_secs(120));
    // Whatever happened, nothing the script started outlives the test.
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
    let out = out
        .unwrap_or_else(|_| panic!("the walkthrough did not finish in 120 s"))
        .expect("the walkthrough's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed after {:?}: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        started.elapsed(),
        out.status
    );
    for expected in [
        "\"secretKey\":\"sk_",
        "\"isNew\":true",
        "\"total\":1",
        ".eml",
        "\"event\":\"",
        "\"status\":\"SEN",
    ] {
        assert!(
            stdout.contains(expected),
            "the walkthrough's output lacks {expected}:\n{stdout}\n--- stderr\n{stderr}"
        );
    }
    let outbox: Vec<_> = std::fs::read_dir(dir.path().join("data/outbox"))
        .expect("the outbox")
        .collect();
    assert!(
        outbox.len() >= 2,
        "the first email and the campaign's: {outbox:?}"
    );
}
