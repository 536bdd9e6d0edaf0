//! The CLI: project and domain commands on a stopped server's data directory and beside
//! a running server (through its control socket), and `--data-dir` on every command.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::app::{bin, mailroom, mailroom_with, test_config, TestApp};

#[test]
fn project_create_prints_its_keys_as_json_and_they_work_once_the_server_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = mailroom(&data, &["project", "create", "--name", "Acme"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["name"], "Acme");
    let secret = v["secretKey"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sk_") && secret.len() >= 35);
    let public = v["publicKey"].as_str().unwrap().to_owned();
    assert!(public.starts_with("pk_"));
    let id = v["id"].as_str().unwrap().to_owned();

    let list = mailroom(&data, &["project", "list"]);
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    let raw = every_byte_under(&data);
    let holds = |needle: &[u8]| raw.windows(needle.len()).any(|w| w == needle);
    // The control: the scan does read the store, where the project's name is.
    assert!(holds(b"Acme"), "the scan reads the stored records");
    assert!(!holds(secret.as_bytes()), "keys are stored hashed");
    assert!(!holds(public.as_bytes()), "keys are stored hashed");

    let out = mailroom(&data, &["project", "disable", &id]);
    assert!(out.status.success());
    let out = mailroom(&data, &["project", "enable", &id]);
    assert!(out.status.success());
    let out = mailroom(&data, &["project", "rotate-keys", &id]);
    let rotated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(rotated["secretKey"], secret.as_str());
}

/// Every byte of every file under `dir`, its folders included (sled keeps its data in
/// files below the top of the data directory); on the PostgreSQL run, every stored key
/// and value (what the server wrote to the database).
fn every_byte_under(dir: &std::path::Path) -> Vec<u8> {
    if crate::support::postgres::postgres_url().is_some() {
        let store = crate::support::postgres::open_store(dir);
        return store
            .scan(b"", None, false)
            .flat_map(|kv| {
                let (k, v) = kv.expect("read the store");
                [k, v].concat()
            })
            .collect();
    }
    every_file_byte_under(dir)
}

fn every_file_byte_under(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(every_file_byte_under(&path));
        } else {
            out.extend(std::fs::read(&path).unwrap_or_default());
        }
    }
    out
}

/// A command's JSON answer on stdout; panics with its stderr when it failed.
fn answer(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON value on stdout")
}

fn text(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {v}"))
        .to_owned()
}

#[test]
fn project_create_beside_a_running_server_gives_keys_that_work_at_once() {
    let app = TestApp::spawn();
    let created = answer(mailroom(
        &app.data_dir,
        &["project", "create", "--name", "Beside"],
    ));
    let (id, secret) = (text(&created, "id"), text(&created, "secretKey"));
    assert_eq!(app.get("/contacts", &secret).status, 200);
    let list = answer(mailroom(&app.data_dir, &["project", "list"]));
    assert_eq!(list[0]["id"], id.as_str(), "{list}");

    answer(mailroom(&app.data_dir, &["project", "disable", &id]));
    let r = app.get("/contacts", &secret);
    assert_eq!(
        (r.status, r.code().as_str()),
        (403, "PROJECT_DISABLED"),
        "the running server's key cache forgot the key: {}",
        r.text
    );
    answer(mailroom(&app.data_dir, &["project", "enable", &id]));
    let rotated = answer(mailroom(&app.data_dir, &["project", "rotate-keys", &id]));
    assert_eq!(app.get("/contacts", &secret).status, 401);
    assert_eq!(
        app.get("/contacts", &text(&rotated, "secretKey")).status,
        200
    );
}

#[test]
fn domain_trust_and_domain_list_work_beside_a_running_server() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let empty = answer(mailroom(
        &app.data_dir,
        &["domain", "list", "--project", &p.id],
    ));
    assert_eq!(empty, json!([]));
    let trusted = answer(mailroom(
        &app.data_dir,
        &["domain", "trust", "Acme.Example", "--project", &p.id],
    ));
    assert_eq!(
        (trusted["domain"].as_str(), trusted["status"].as_str()),
        (Some("acme.example"), Some("VERIFIED"))
    );
    let seen = app.get("/domains", &p.secret).json();
    assert_eq!(seen["domains"][0]["id"], trusted["id"], "{seen}");
    assert_eq!(seen["domains"][0]["trusted"], true, "{seen}");
    let listed = answer(mailroom(
        &app.data_dir,
        &["domain", "list", "--project", &p.id],
    ));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], trusted["id"]);
    let purposes: Vec<&str> = listed[0]["records"]
        .as_array()
        .map(|r| r.iter().filter_map(|x| x["purpose"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(purposes, ["OWNERSHIP", "DKIM", "SPF", "DMARC"], "{listed}");

    let missing = mailroom(
        &app.data_dir,
        &[
            "domain",
            "list",
            "--project",
            "01a20f54-f3c0-75ee-88c4-81dc155616f1",
        ],
    );
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn the_control_socket_is_its_owners_alone_and_a_killed_servers_socket_is_not_in_the_way() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let mut app = TestApp::spawn();
    let socket = app.data_dir.join("mailroom.sock");
    let meta = std::fs::metadata(&socket).expect("a socket in the data directory");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    app.kill9();
    assert!(socket.exists(), "kill -9 leaves the socket behind");
    let created = answer(mailroom(
        &app.data_dir,
        &["project", "create", "--name", "Offline"],
    ));
    app.restart();
    let again = answer(mailroom(
        &app.data_dir,
        &["project", "create", "--name", "Online"],
    ));
    for key in [text(&created, "secretKey"), text(&again, "secretKey")] {
        assert_eq!(app.get("/contacts", &key).status, 200);
    }
}

#[test]
fn a_server_without_its_control_socket_leaves_project_commands_a_clear_error_on_sled_and_works_on_postgres(
) {
    let app = TestApp::spawn_with(|s| s.control.enabled = false);
    assert!(!app.data_dir.join("mailroom.sock").exists());
    let out = mailroom(&app.data_dir, &["project", "list"]);
    if crate::support::postgres::postgres_url().is_some() {
        // On PostgreSQL servers are nodes that share the database, and the CLI is one
        // more client of it (docs/cluster.md): it needs no socket.
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");
    assert!(err.contains("control"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A server started as an operator starts one: `mailroom serve` with flags, and none of
/// the harness's environment (no outbox, no public URL). Killed when dropped.
pub(crate) struct Served {
    child: Child,
    pub base: String,
}

impl Served {
    pub(crate) fn start(args: &[&str], log: &Path) -> Served {
        let mut child = Command::new(bin())
            .arg("serve")
            .args(args)
            .arg("--config")
            .arg(test_config())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("a log file"))
            .spawn()
            .expect("start mailroom");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("mailroom listening on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let base = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!(
                    "the server did not start: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            });
        Served { child, base }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The List-Unsubscribe URL of the first email written into `outbox`, once one is there
/// whole (within 30 s).
fn unsubscribe_url_in(outbox: &Path) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let raw = std::fs::read_dir(outbox)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path()).ok())
            .unwrap_or_default();
        // Folded header lines joined again.
        let unfolded = raw.replace("\r\n ", " ").replace("\n ", " ");
        let url = unfolded
            .lines()
            .find_map(|l| l.strip_prefix("List-Unsubscribe:"))
            .and_then(|v| v.trim().strip_prefix('<'))
            .and_then(|v| v.split_once('>'))
            .map(|(url, _)| url.replace(' ', ""));
        if url.is_some() || Instant::now() >= deadline {
            return url;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn unsubscribe_links_follow_the_port_and_the_outbox_follows_the_data_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("elsewhere");
    let dir = data.to_str().unwrap();
    let created = answer(mailroom_bare(&[
        "--data-dir",
        dir,
        "project",
        "create",
        "--name",
        "Ports",
    ]));
    let (id, secret) = (text(&created, "id"), text(&created, "secretKey"));
    answer(mailroom_bare(&[
        "domain",
        "trust",
        "acme.test",
        "--project",
        &id,
        "--data-dir",
        dir,
    ]));
    let port = free_port();
    let server = Served::start(
        &["--port", &port.to_string(), "--data-dir", dir],
        &tmp.path().join("server.log"),
    );
    assert_eq!(server.base, format!("http://127.0.0.1:{port}"));
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .redirects(0)
        .build();
    let post = |path: &str, body: Value| {
        agent
            .post(&format!("{}{path}", server.base))
            .set("Authorization", &format!("Bearer {secret}"))
            .send_json(body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
            .into_json::<Value>()
            .unwrap()
    };
    post(
        "/contacts",
        json!({"email": "reader@example.com", "subscribed": true}),
    );
    let campaign = post(
        "/campaigns",
        json!({"name": "Ports", "subject": "Hi", "body": "<p>Hi</p>",
               "from": "hello@acme.test", "type": "ALL"}),
    );
    let cid = text(&campaign["data"], "id");
    post(&format!("/campaigns/{cid}/send"), json!({}));

    let unsubscribe =
        unsubscribe_url_in(&data.join("outbox")).expect("an email in <data-dir>/outbox");
    assert!(
        unsubscribe.starts_with(&format!("http://127.0.0.1:{port}/unsubscribe/")),
        "{unsubscribe}"
    );
    let page = agent.get(&unsubscribe).call().expect("the link answers");
    assert_eq!(page.status(), 200);
}

/// The binary with the test config and nothing else (`--data-dir` says where).
fn mailroom_bare(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(test_config())
        .output()
        .expect("run mailroom")
}

#[test]
fn an_unknown_project_id_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = mailroom(&tmp.path().join("d"), &["project", "disable", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a project id"));
}

#[test]
fn a_trusted_domain_sends_a_first_email_into_the_file_outbox_without_dns() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let created: Value =
        serde_json::from_slice(&mailroom(&data, &["project", "create", "--name", "Laptop"]).stdout)
            .unwrap();
    let (id, secret) = (
        created["id"].as_str().unwrap().to_owned(),
        created["secretKey"].as_str().unwrap().to_owned(),
    );
    let out = mailroom(&data, &["domain", "trust", "Example.COM", "--project", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let domain: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            domain["domain"].as_str(),
            domain["status"].as_str(),
            domain["trusted"].as_bool()
        ),
        (Some("example.com"), Some("VERIFIED"), Some(true))
    );
    let bad = mailroom(
        &data,
        &["domain", "trust", "example.com", "--project", "nope"],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a project id"));

    // The server, with its embedded defaults' file transport and no DNS at all.
    let app = TestApp::start(data.clone(), |_| {});
    let r = app.post(
        "/v1/send",
        &secret,
        json!({"to": "ada@example.org", "from": "hello@example.com", "subject": "First", "body": "<p>Hi</p>"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let outbox = data.join("outbox");
    let mut eml = None;
    for _ in 0..200 {
        eml = std::fs::read_dir(&outbox)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path()).ok());
        if eml.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let eml = eml.expect("an .eml file in the outbox");
    assert!(eml.contains("Subject: First"), "{eml}");
    assert!(
        eml.contains("DKIM-Signature") && eml.contains("d=example.com"),
        "{eml}"
    );
    let listed = app.get("/domains", &secret).json();
    assert_eq!(listed["domains"][0]["trusted"], true);
}

#[test]
fn the_admin_api_trusts_a_domain_while_the_server_runs_and_tenants_cannot() {
    // A DNS server that answers, and has none of the domain's records.
    let app = TestApp::spawn_with_dns(|_| {});
    let p = app.create_project("Acme");
    let path = format!("/admin/projects/{}/domains/trust", p.id);
    let r = app.post(&path, &p.secret, json!({"domain": "acme.example"}));
    assert_eq!(
        r.status, 401,
        "a project key is not the admin token: {}",
        r.text
    );
    let r = app.post(
        &path,
        crate::support::app::ADMIN_TOKEN,
        json!({"domain": "acme.example"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json()["status"].as_str(), r.json()["trusted"].as_bool()),
        (Some("VERIFIED"), Some(true))
    );
    let d = app.get("/domains", &p.secret).json();
    let id = d["domains"][0]["id"].as_str().unwrap().to_owned();
    // A conclusive DNS check (nothing is published) leaves a trusted domain VERIFIED;
    // an untrusted one in the same state goes PENDING or FAILED.
    let checked = app.post(&format!("/domains/{id}/verify"), &p.secret, json!({}));
    assert_eq!(checked.json()["status"], "VERIFIED", "{}", checked.text);
    assert!(
        checked.json()["lastCheckedAt"].is_string(),
        "{}",
        checked.text
    );
    assert_eq!(
        checked.json()["records"][0]["verified"],
        false,
        "{}",
        checked.text
    );
    let r = app.post(&format!("/domains/{id}/trust"), &p.secret, json!({}));
    assert_eq!(r.status, 404, "there is no tenant route to trust a domain");
    let r = app.post(
        "/admin/projects/01a20f54-f3c0-75ee-88c4-81dc155616f1/domains/trust",
        crate::support::app::ADMIN_TOKEN,
        json!({"domain": "acme.example"}),
    );
    assert_eq!(r.status, 404, "{}", r.text);
}

#[test]
fn an_offline_domain_trust_keeps_to_the_projects_domain_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let one = |s: &mut crate::support::settings::Setup| s.limits.max_domains = 1;
    let created: Value = serde_json::from_slice(
        &mailroom_with(&data, &["project", "create", "--name", "Small"], one).stdout,
    )
    .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let trust =
        |domain: &str| mailroom_with(&data, &["domain", "trust", domain, "--project", &id], one);
    assert!(trust("one.example").status.success());
    let over = trust("two.example");
    assert!(
        !over.status.success(),
        "a second domain past max_domains = 1"
    );
    assert!(
        String::from_utf8_lossy(&over.stderr).contains("max_domains"),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
    assert!(
        trust("ONE.example").status.success(),
        "trusting a domain it has again adds none"
    );
}
