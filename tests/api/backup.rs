//! `mailroom backup` beside a running server that keeps taking writes, `mailroom
//! restore` into a new data directory, and `mailroom project export`.

use std::collections::BTreeSet;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::app::{mailroom, mailroom_with, TestApp};
use crate::support::settings::{Backend, Setup};

fn succeeded(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// Upserts `w<i>@example.com` and tracks `wrote-<i>` for it, i = 0, 1, ..., until told
/// to stop; `acked` is how many such pairs the server has acknowledged.
fn writer(
    base: String,
    secret: String,
    public: String,
    acked: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build();
    let post = |path: &str, key: &str, body: Value| {
        agent
            .post(&format!("{base}{path}"))
            .set("Authorization", &format!("Bearer {key}"))
            .send_json(body)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let email = format!("w{i}@example.com");
        post(
            "/contacts",
            &secret,
            json!({"email": email, "data": {"i": i}}),
        );
        post(
            "/v1/track",
            &public,
            json!({"email": email, "event": format!("wrote-{i}")}),
        );
        i += 1;
        acked.store(i, Ordering::SeqCst);
    }
}

fn wait_for(what: &str, deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < deadline, "waited {deadline:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_backup_taken_under_writes_holds_every_acknowledged_write_and_restores_into_a_server_that_serves_them(
) {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"name": "Welcome", "subject": "Hi", "body": "<p>hello</p>"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let (acked, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let thread = {
        let (base, s, pk) = (app.base.clone(), p.secret.clone(), p.public.clone());
        let (a, st) = (acked.clone(), stop.clone());
        std::thread::spawn(move || writer(base, s, pk, a, st))
    };
    wait_for("the writer's first writes", Duration::from_secs(60), || {
        acked.load(Ordering::SeqCst) >= 20
    });

    let tmp = tempfile::tempdir().unwrap();
    // A backup that finishes between two of the writer's acknowledgements took no
    // write during it, and shows nothing of what this test is for: take another (each
    // to a file of its own) until one overlapped the writes, up to five.
    let (mut file, mut before, mut after, mut out);
    let mut attempt = 0;
    loop {
        attempt += 1;
        file = tmp.path().join(format!("acme-{attempt}.mrb"));
        before = acked.load(Ordering::SeqCst);
        out = mailroom(&app.data_dir, &["backup", "--out", file.to_str().unwrap()]);
        after = acked.load(Ordering::SeqCst);
        if after > before || attempt == 5 {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    thread.join().expect("the writer");
    let stderr = succeeded(&out);
    assert!(
        stderr.contains("backup: done"),
        "a summary on stderr: {stderr}"
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(summary["records"].as_u64().unwrap() > before, "{summary}");
    assert!(
        after > before,
        "the writer kept writing during one of {attempt} backups"
    );

    // Restore makes a sled directory, so on the PostgreSQL run this is a backup of a
    // PostgreSQL store restored into sled (restoring into PostgreSQL is not supported).
    let sled = |s: &mut Setup| s.storage.backend = Backend::Sled;
    let restored = tmp.path().join("restored");
    let restore = || {
        mailroom_with(
            &app.data_dir,
            &[
                "restore",
                file.to_str().unwrap(),
                "--data",
                restored.to_str().unwrap(),
            ],
            sled,
        )
    };
    succeeded(&restore());
    let again = restore();
    assert!(!again.status.success(), "a non-empty directory is refused");
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));

    let copy = TestApp::start(restored.clone(), sled);
    let emails: BTreeSet<String> = copy.all_emails(&p.secret).into_iter().collect();
    for i in 0..before {
        assert!(
            emails.contains(&format!("w{i}@example.com")),
            "contact {i} of {before}"
        );
    }
    let events = copy.get("/events?limit=1", &p.secret).json();
    assert!(events["total"].as_u64().unwrap() >= before, "{events}");
    let last = copy
        .get(
            &format!("/events?email=w{}@example.com", before - 1),
            &p.secret,
        )
        .json();
    assert_eq!(
        last["events"][0]["name"],
        format!("wrote-{}", before - 1),
        "{last}"
    );
    let templates = copy.get("/templates", &p.secret).json();
    assert_eq!(templates["templates"][0]["name"], "Welcome", "{templates}");
}

fn template(app: &TestApp, key: &str, name: &str) -> String {
    let r = app.post(
        "/templates",
        key,
        json!({"name": name, "subject": "Hi", "body": "<p>hello</p>"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()["id"].as_str().unwrap().to_owned()
}

fn lines(jsonl: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(jsonl)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_project_export_is_json_lines_of_that_project_only_with_or_without_a_running_server() {
    let mut app = TestApp::spawn();
    let (a, b) = (app.create_project("Acme"), app.create_project("Other"));
    for i in 0..3 {
        app.upsert(&a.secret, json!({"email": format!("a{i}@acme.test")}));
    }
    app.upsert(&b.secret, json!({"email": "b@other.test"}));
    let a_template = template(&app, &a.secret, "Acme welcome");
    let b_template = template(&app, &b.secret, "Other welcome");

    let out = mailroom(&app.data_dir, &["project", "export", &a.id]);
    succeeded(&out);
    let live = lines(&out.stdout);
    let of = |kind: &str| -> Vec<&Value> { live.iter().filter(|l| l["kind"] == kind).collect() };
    let emails: BTreeSet<&str> = of("contact")
        .iter()
        .map(|c| c["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        emails,
        BTreeSet::from(["a0@acme.test", "a1@acme.test", "a2@acme.test"])
    );
    assert_eq!(of("template").len(), 1);
    assert_eq!(of("template")[0]["id"], a_template.as_str());
    assert_eq!(of("project")[0]["id"], a.id.as_str());
    let text = String::from_utf8_lossy(&out.stdout);
    for foreign in [
        "b@other.test",
        b.id.as_str(),
        b_template.as_str(),
        "Other welcome",
    ] {
        assert!(!text.contains(foreign), "{foreign} leaked into the export");
    }

    app.kill9();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("acme.jsonl");
    succeeded(&mailroom(
        &app.data_dir,
        &["project", "export", &a.id, "--out", file.to_str().unwrap()],
    ));
    assert_eq!(
        lines(&std::fs::read(&file).unwrap()),
        live,
        "the same without a server"
    );
}
