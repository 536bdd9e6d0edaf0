//! `--profile DIR`: the server recorded with `perf record -g` while a scenario loads it,
//! and a flame graph drawn from the recording when inferno's tools are installed. The
//! recording is of the server's process only (the load client and the test servers are
//! not in it), at 499 Hz, for the scenario's measured seconds after its warm-up.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Recording {
    child: Option<Child>,
    data: PathBuf,
    svg: PathBuf,
    name: String,
}

/// Starts `perf record` on `pid` for `seconds`, 1 s from now (after the warm-up).
pub fn record(dir: &Path, name: &str, pid: u32, seconds: u64) -> Recording {
    record_after(dir, name, pid, 1, seconds)
}

/// Starts `perf record` on `pid` for `seconds`, `delay` seconds from now.
pub fn record_after(dir: &Path, name: &str, pid: u32, delay: u64, seconds: u64) -> Recording {
    std::fs::create_dir_all(dir)
        .unwrap_or_else(|e| panic!("--profile: creating {}: {e}", dir.display()));
    let data = dir.join(format!("{name}.perf.data"));
    let svg = dir.join(format!("{name}.svg"));
    let script = format!(
        "sleep {delay}; exec perf record -F 499 -g -p {pid} -o {} -- sleep {seconds}",
        data.display()
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("--profile: perf could not start ({e}); install Debian's linux-perf");
            None
        }
    };
    Recording {
        child,
        data,
        svg,
        name: name.to_owned(),
    }
}

impl Recording {
    /// Waits for perf to write its file, then draws the flame graph if it can.
    pub fn finish(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let waited = child.wait();
        if !matches!(waited, Ok(s) if s.success()) || !self.data.exists() {
            eprintln!(
                "--profile: perf recorded nothing for {} (is perf installed, and \
                 kernel.perf_event_paranoid at most 1?)",
                self.name
            );
            return;
        }
        let drawn = Command::new("sh")
            .args([
                "-c",
                &format!(
                    "perf script -i {} 2>/dev/null | inferno-collapse-perf | inferno-flamegraph --title '{}' > {}",
                    self.data.display(),
                    self.name,
                    self.svg.display()
                ),
            ])
            .status();
        match drawn {
            Ok(s) if s.success() => println!(
                "profile of {}: {} and {}",
                self.name,
                self.data.display(),
                self.svg.display()
            ),
            _ => {
                let _ = std::fs::remove_file(&self.svg);
                println!(
                    "profile of {}: {} (no flame graph: `cargo install inferno` draws one)",
                    self.name,
                    self.data.display()
                )
            }
        }
        // Let perf's own exit settle before the next scenario's load.
        std::thread::sleep(Duration::from_millis(200));
    }
}
