//! Starting the server under test: a temporary data directory, a project made with the
//! CLI, the rate limit off, and the port read from the server's stdout.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Server {
    child: Child,
    addr: SocketAddr,
    /// What the server printed before its HTTP address (other listeners' addresses).
    pub printed: Vec<String>,
    pub secret_key: String,
    _dir: tempfile::TempDir,
}

pub fn default_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("release/mailroom")
}

impl Server {
    /// Starts the server with `env` added to the bench defaults.
    pub fn start(bin: &Path, env: &[(String, String)]) -> Server {
        assert!(
            bin.exists(),
            "{} not found: run `cargo build --release` first",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let created = Command::new(bin)
            .args(["project", "create", "--name", "bench"])
            .env("MAILROOM__STORAGE__PATH", &data)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("mailroom project create");
        assert!(
            created.status.success(),
            "{}",
            String::from_utf8_lossy(&created.stderr)
        );
        let keys: serde_json::Value =
            serde_json::from_slice(&created.stdout).expect("project JSON");
        let (child, addr, printed) = spawn(bin, &data, env, None);
        Server {
            child,
            addr,
            printed,
            secret_key: keys["secretKey"].as_str().unwrap_or_default().to_owned(),
            _dir: dir,
        }
    }

    /// Starts the server with `env` added to the bench defaults, making no project: one
    /// more node on a database that already has one (`secret_key` is empty).
    pub fn start_node(bin: &Path, env: &[(String, String)]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let (child, addr, printed) = spawn(bin, &dir.path().join("data"), env, None);
        Server {
            child,
            addr,
            printed,
            secret_key: String::new(),
            _dir: dir,
        }
    }

    /// SIGKILL (`kill -9`): no drain, no hand-over; waits for the exit.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the server with SIGTERM (it drains and flushes the store), waits for it, and
    /// starts `bin` again on the same data directory, its log (stderr) written to `log`.
    pub fn restart(&mut self, bin: &Path, env: &[(String, String)], log: &Path) {
        self.stop();
        let (child, addr, printed) = spawn(bin, &self.data_dir(), env, Some(log));
        self.child = child;
        self.addr = addr;
        self.printed = printed;
    }

    /// SIGTERM, then waits for the exit.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let _ = self.child.wait();
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self._dir.path().join("data")
    }

    /// The server's resident set now (VmRSS).
    pub fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Open file descriptors of the server.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// The kernel's high-water mark of the server's resident set (VmHWM).
    pub fn peak_rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `mailroom serve` on `data` and reads its port from stdout.
fn spawn(
    bin: &Path,
    data: &Path,
    env: &[(String, String)],
    log: Option<&Path>,
) -> (Child, SocketAddr, Vec<String>) {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).expect("server log file")),
        None => Stdio::inherit(),
    };
    let mut child = Command::new(bin)
        .arg("serve")
        .env("MAILROOM__STORAGE__PATH", data)
        .env("MAILROOM__MAIL__FILE_DIR", data.join("outbox"))
        .env("MAILROOM__SERVER__PORT", "0")
        .env("MAILROOM__LIMITS__REQUESTS_PER_MINUTE", "0")
        .env("MAILROOM__LOG__LEVEL", "warn")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start mailroom serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut printed = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .expect("server exited before listening")
            .expect("read stdout");
        if let Some(url) = line.strip_prefix("mailroom listening on http://") {
            break url.parse().expect("socket address");
        }
        printed.push(line);
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr, printed)
}
