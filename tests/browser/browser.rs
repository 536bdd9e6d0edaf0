//! A headless Chromium behind a chromedriver of the test's own, on a free port.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};

/// A program on the PATH, as the shell (and `.ci/run`'s `command -v`) finds it.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn chromedriver() -> Option<std::path::PathBuf> {
    on_path("chromedriver")
}

fn chromium() -> Option<std::path::PathBuf> {
    on_path("chromium")
}

/// How long a page may take to show what a test waits for.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Browser {
    pub client: Client,
    pub base: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

/// Whether the tests can run here; without Chromium they skip, except under CI.
pub fn available() -> bool {
    let present = chromedriver().is_some() && chromium().is_some();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but chromium/chromedriver are missing (apt-get install chromium chromium-driver)"
        );
        mailroom_testkit::skipped(
            "no chromium or chromedriver on the PATH (apt-get install chromium chromium-driver)",
        );
    }
    present
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a Chromium session; `base` is the app's URL.
    pub async fn start(base: &str) -> Browser {
        let port = free_port();
        // A process group of its own, which Chromium joins: a test that fails (and so
        // never ends its session) still takes the whole browser down with the group.
        let driver = Command::new(chromedriver().expect("chromedriver on the PATH"))
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + WAIT;
        while ureq::get(&format!("{url}/status")).call().is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium().expect("chromium on the PATH"),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&url)
            .await
            .expect("a Chromium session");
        Browser {
            client,
            base: base.trim_end_matches('/').to_owned(),
            driver,
            _profile: profile,
        }
    }

    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
    }

    /// The element, once it is on the page.
    pub async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
    }

    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.expect("clear");
        field.send_keys(text).await.expect("type");
    }

    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.expect("click");
    }

    /// The element's text, once it is on the page (read again if the page changed under
    /// the read, as it does while a form's answer loads).
    pub async fn text(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.find(css).await.text().await {
                Ok(text) => return text,
                Err(e) => assert!(Instant::now() < deadline, "reading {css}: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the element's text satisfies `ok`, and answers it.
    pub async fn until_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(e) => e.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if ok(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "{css} still shows {text:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the page's path satisfies `ok` (a form's answer has loaded).
    pub async fn until_path(&self, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let path = self.path().await;
            if ok(&path) {
                return path;
            }
            assert!(Instant::now() < deadline, "still at {path}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("url")
            .path()
            .to_owned()
    }

    /// Writes a PNG of the page to `docs/dashboard/<name>.png` when
    /// `MAILROOM_SCREENSHOTS` is set (how the screenshots in docs/ are made).
    pub async fn screenshot(&self, name: &str) {
        if std::env::var_os("MAILROOM_SCREENSHOTS").is_none() {
            return;
        }
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dashboard");
        std::fs::create_dir_all(&dir).expect("docs/dashboard");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    /// Ends chromedriver and every Chromium process it started (its process group).
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.wait();
    }
}

/// Runs an async test body on a runtime of its own.
pub fn run<F: std::future::Future<Output = ()>>(body: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(body)
}
