//! The harness: `TestApp::spawn()` starts the server binary and returns a client for it;
//! `TestApp::spawn_with(|s| ...)` with settings of its own (`support::settings`).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mailroom_testkit::TestDns;
use serde_json::{json, Value};

use super::settings::{self, Setup};

pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdefghijklmnop";

/// Every process the tests start runs under umask 022, the usual default that leaves
/// new files readable by every local user: the server must make its own files private
/// whatever it was started with (`files.rs`).
pub fn command() -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin());
    // SAFETY: umask is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
            Ok(())
        });
    }
    cmd
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mailroom")
}

pub fn test_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/test.toml")
}

pub struct TestApp {
    pub base: String,
    pub data_dir: PathBuf,
    child: Option<Child>,
    /// The settings file the server runs with (see `support::settings`).
    settings: PathBuf,
    /// What its process needs in the environment besides (the armed faults).
    env: Vec<(String, String)>,
    agent: ureq::Agent,
    /// The DNS server the app asks, for apps started with `spawn_with_dns`.
    dns: Option<TestDns>,
    /// What the server printed on stdout (its listening addresses), line by line.
    stdout: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _tmp: Option<tempfile::TempDir>,
}

#[derive(Debug, Clone)]
pub struct Project {
    pub id: String,
    pub secret: String,
    pub public: String,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Resp {
    /// What a request came to, an error status included (a failed connection panics).
    pub fn of(method: &str, path: &str, result: Result<ureq::Response, ureq::Error>) -> Resp {
        let res = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = res.status();
        let headers = res
            .headers_names()
            .into_iter()
            .map(|n| {
                let v = res.header(&n).unwrap_or_default().to_owned();
                (n, v)
            })
            .collect();
        let text = res.into_string().unwrap_or_default();
        Resp {
            status,
            headers,
            text,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// (field, code) of each entry of a 422's `error.errors`.
    pub fn field_codes(&self) -> Vec<(String, String)> {
        self.json()["error"]["errors"]
            .as_array()
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| {
                        let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
                        (text("field"), text("code"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The error code of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl TestApp {
    pub fn spawn() -> TestApp {
        Self::spawn_with(|_| {})
    }

    /// Starts a server on a new data directory with the test settings as `configure`
    /// leaves them (`|s| s.limits.max_contacts = 2`).
    pub fn spawn_with(configure: impl FnOnce(&mut Setup)) -> TestApp {
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut app = Self::start(tmp.path().join("data"), configure);
        app._tmp = Some(tmp);
        app
    }

    /// Starts a DNS server on loopback and an app whose `dns.nameservers` is it.
    pub fn spawn_with_dns(configure: impl FnOnce(&mut Setup)) -> TestApp {
        let dns = TestDns::start();
        let addr = dns.addr();
        let mut app = Self::spawn_with(|s| {
            s.dns.nameservers = vec![addr];
            configure(s);
        });
        app.dns = Some(dns);
        app
    }

    /// The DNS server of an app started with `spawn_with_dns`.
    pub fn dns(&self) -> &TestDns {
        self.dns.as_ref().expect("started with spawn_with_dns")
    }

    /// Starts a server on `data_dir` (which may hold data already). Its settings are
    /// written beside it (`<data_dir>.toml`), where `restart` finds them again.
    pub fn start(data_dir: PathBuf, configure: impl FnOnce(&mut Setup)) -> TestApp {
        let settings = data_dir.with_extension("toml");
        let env = settings::write(&settings, &data_dir, configure);
        let mut app = TestApp {
            base: String::new(),
            data_dir,
            child: None,
            settings,
            env,
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(30))
                .build(),
            dns: None,
            stdout: Default::default(),
            _tmp: None,
        };
        app.launch();
        app
    }

    /// Runs the binary on the written settings and waits for the address it listens on.
    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.with_extension("log"))
            .expect("server log file");
        let mut child = command()
            .args(["serve", "--config"])
            .arg(&self.settings)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start the mailroom binary");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        let printed = self.stdout.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                printed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(line.trim().to_owned());
                if let Some(url) = line.trim().strip_prefix("mailroom listening on ") {
                    let _ = tx.send(url.to_owned());
                }
                line.clear();
            }
        });
        self.base = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(base) => base,
            Err(_) => {
                let _ = child.kill();
                let mut log = String::new();
                let _ = std::fs::File::open(self.data_dir.with_extension("log"))
                    .and_then(|mut f| f.read_to_string(&mut log));
                panic!("the server did not start; its log:\n{log}");
            }
        };
        self.child = Some(child);
    }

    /// `kill -9`: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().expect("reap");
        }
    }

    /// Starts a new server on the same data directory and settings.
    pub fn restart(&mut self) {
        self.kill9();
        self.launch();
        self.wait_for_leases();
    }

    /// On PostgreSQL a restarted server is a node that takes its projects back once the
    /// leases of the process before it run out: waits (with a deadline) until it owns
    /// every project, as a server on sled does at once.
    fn wait_for_leases(&self) {
        if super::postgres::postgres_url().is_none() {
            return;
        }
        let listed = self.request("GET", "/admin/projects", Some(ADMIN_TOKEN), None);
        let Some(projects) = (listed.status == 200)
            .then(|| listed.json()["projects"].as_array().map(Vec::len))
            .flatten()
        else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let health = self.request("GET", "/health", None, None).json();
            if health["projectsOwned"].as_u64() >= Some(projects as u64) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the restarted server did not take its {projects} projects back in 30 s");
    }

    /// Sends SIGTERM and waits up to `limit` for the server to exit; its exit status, or
    /// None if it was still running then (it is killed, so the test fails, not hangs).
    pub fn sigterm(&mut self, limit: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take().expect("running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM was not delivered");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().expect("poll the server") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What follows `prefix` on the first line the server printed that starts with it
    /// (`feedback SMTP listening on `).
    pub fn printed(&self, prefix: &str) -> Option<String> {
        self.stdout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix(prefix).map(str::to_owned))
    }

    /// The server's log so far (its stderr, kept beside the data directory).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }

    /// Whether this server's process is still ours to talk to (not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn child_pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn take_child(&mut self) -> Child {
        self.child.take().expect("running")
    }

    pub fn request(&self, method: &str, path: &str, key: Option<&str>, body: Option<&str>) -> Resp {
        self.request_with(method, path, key, body, &[])
    }

    /// A request with extra headers (such as `Idempotency-Key`).
    pub fn request_with(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut req = self
            .agent
            .request(method, &format!("{}{}", self.base, path));
        for (name, value) in headers {
            req = req.set(name, value);
        }
        if let Some(k) = key {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        let result = match body {
            Some(b) => req.set("Content-Type", "application/json").send_string(b),
            None => req.call(),
        };
        Resp::of(method, path, result)
    }

    pub fn get(&self, path: &str, key: &str) -> Resp {
        self.request("GET", path, Some(key), None)
    }

    pub fn post(&self, path: &str, key: &str, body: Value) -> Resp {
        self.request("POST", path, Some(key), Some(&body.to_string()))
    }

    pub fn patch(&self, path: &str, key: &str, body: Value) -> Resp {
        self.request("PATCH", path, Some(key), Some(&body.to_string()))
    }

    pub fn delete(&self, path: &str, key: &str) -> Resp {
        self.request("DELETE", path, Some(key), None)
    }

    pub fn create_project(&self, name: &str) -> Project {
        let r = self.post("/admin/projects", ADMIN_TOKEN, json!({ "name": name }));
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        Project {
            id: v["id"].as_str().unwrap().to_owned(),
            secret: v["secretKey"].as_str().unwrap().to_owned(),
            public: v["publicKey"].as_str().unwrap().to_owned(),
        }
    }

    /// Upserts a contact and returns its record.
    pub fn upsert(&self, key: &str, body: Value) -> Value {
        let r = self.post("/contacts", key, body);
        assert!(
            r.status == 200 || r.status == 201,
            "{} {}",
            r.status,
            r.text
        );
        r.json()
    }

    /// Every contact record, walking the pages newest first.
    pub fn all_contacts(&self, key: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/contacts?limit=100&cursor={c}"),
                None => "/contacts?limit=100".to_owned(),
            };
            let page = self.get(&path, key).json();
            out.extend(page["contacts"].as_array().unwrap().iter().cloned());
            match page["cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return out,
            }
        }
    }

    /// Every contact email, walking the pages.
    pub fn all_emails(&self, key: &str) -> Vec<String> {
        self.all_contacts(key)
            .iter()
            .map(|c| c["email"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs the CLI with the test configuration on the data directory `data`.
pub fn mailroom(data: &Path, args: &[&str]) -> std::process::Output {
    mailroom_with(data, args, |_| {})
}

/// `mailroom` with settings of its own (written beside `data`, as a server's are).
pub fn mailroom_with(
    data: &Path,
    args: &[&str],
    configure: impl FnOnce(&mut Setup),
) -> std::process::Output {
    let file = data.with_extension("cli.toml");
    let env = settings::write(&file, data, configure);
    command()
        .args(args)
        .arg("--config")
        .arg(&file)
        .arg("--data-dir")
        .arg(data)
        .envs(env)
        .output()
        .expect("run mailroom")
}

/// The error output of a server that refuses to start with these settings (it must
/// exit unsuccessfully).
pub fn refused_start(configure: impl FnOnce(&mut Setup)) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("settings.toml");
    let env = settings::write(&file, &dir.path().join("data"), configure);
    let out = command()
        .args(["serve", "--config"])
        .arg(&file)
        .envs(env)
        .output()
        .expect("run mailroom");
    assert!(!out.status.success(), "the server started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A 422 that refuses a filter past `limits.max_filter_evaluations`, naming `field`.
pub fn assert_over_filter_budget(r: &Resp, field: &str) {
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.field_codes(), [(field.to_owned(), "too_big".to_owned())]);
    assert!(
        r.json()["error"]["suggestion"]
            .as_str()
            .is_some_and(|s| s.contains("limits.max_filter_evaluations")),
        "{}",
        r.text
    );
}
