//! Upgrades (docs/operations.md, Upgrades): a backup of each key layout since the oldest
//! this version upgrades is kept in tests/fixtures; each is restored and served by this
//! version, and every kind of record reads back as the version that wrote it answered.
//! The layout-6 fixture rewritten as layout 5 is migrated by `mailroom restore`.
//!
//! `tests/fixtures/format-<N>.mrbackup` is the data; `format-<N>.json` holds the project's
//! keys and the answers the writing server gave (`reads`: a path and the answer, with the
//! fields that change by themselves left out). Regenerate the current layout's pair with
//! `cargo test --test api -- --ignored generate_the_fixture_of_the_current_layout`.

use std::path::{Path, PathBuf};

use mailroom_actors::model::{ProjectId, WorkflowId};
use mailroom_actors::store::{codec, keys, Batch, SledStore, Store};
use serde_json::{json, Map, Value};

use crate::support::app::{mailroom, Project, TestApp};
use crate::support::campaign::{
    self as campaigns, data, email_id_of, eventually, id, rig, send_and_settle,
};
use crate::support::settings::Setup;

/// Fields a server changes by itself (a re-check of a domain, how long ago something
/// was), left out of the recorded answers.
const VOLATILE: &[&str] = &["lastCheckedAt"];

/// The restored servers keep every record whatever its age: the fixtures get older
/// while retention counts from the real clock.
/// Retention off: the fixture's records are years old by the server's clock.
fn keep_everything(s: &mut Setup) {
    s.retention.email_content_days = 0;
    s.retention.emails_days = 0;
    s.retention.events_days = 0;
    s.retention.executions_days = 0;
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture backup with its manifest, oldest layout first.
fn every_fixture() -> Vec<(u32, PathBuf, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(fixtures()).expect("tests/fixtures") {
        let path = entry.expect("a fixture").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(layout) = name
            .strip_prefix("format-")
            .and_then(|n| n.strip_suffix(".mrbackup"))
        else {
            continue;
        };
        let layout: u32 = layout.parse().expect("format-<N>.mrbackup");
        let manifest = std::fs::read(path.with_extension("json")).expect("its manifest");
        out.push((layout, path, serde_json::from_slice(&manifest).unwrap()));
    }
    out.sort_by_key(|(layout, _, _)| *layout);
    out
}

fn succeeded(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON answer")
}

/// `mailroom restore FILE --data DIR`; its answer.
fn restore(file: &Path, dir: &Path) -> Value {
    succeeded(&mailroom(
        dir,
        &[
            "restore",
            file.to_str().unwrap(),
            "--data",
            dir.to_str().unwrap(),
        ],
    ))
}

/// `answer` without its volatile fields, at any depth.
fn stable(answer: &Value) -> Value {
    match answer {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), stable(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(stable).collect()),
        other => other.clone(),
    }
}

/// Where `got` differs from `want` (a field of `want` missing or different in `got`;
/// fields a later version adds are fine).
fn differences(want: &Value, got: &Value, at: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                differences(
                    v,
                    g.get(k).unwrap_or(&Value::Null),
                    &format!("{at}.{k}"),
                    out,
                );
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                differences(w, g, &format!("{at}[{i}]"), out);
            }
        }
        // A domain's records to publish grew with the server (DMARC advice, #34): the
        // ones recorded come first, as they were; a new one is advice, never verified
        // by an upgrade.
        (Value::Array(w), Value::Array(g)) if at.ends_with(".records") && g.len() > w.len() => {
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                differences(w, g, &format!("{at}[{i}]"), out);
            }
            for (i, extra) in g.iter().enumerate().skip(w.len()) {
                if extra["verified"] != Value::Bool(false) {
                    out.push(format!("{at}[{i}]: a new record comes verified: {extra}"));
                }
            }
        }
        (w, g) if w == g => {}
        (w, g) => out.push(format!("{at}: was {w}, now {g}")),
    }
}

/// The paths whose answers a fixture records, given the ids it made.
fn paths(ids: &Value) -> Vec<String> {
    let s = |k: &str| {
        ids[k]
            .as_str()
            .unwrap_or_else(|| panic!("an id {k}: {ids}"))
    };
    vec![
        "/contacts?limit=100".into(),
        "/templates".into(),
        "/segments".into(),
        format!("/segments/{}", s("segment")),
        format!("/segments/{}/contacts?limit=100", s("segment")),
        format!("/campaigns/{}", s("campaign")),
        format!("/campaigns/{}/stats", s("campaign")),
        "/events?limit=100".into(),
        "/events/names".into(),
        format!("/workflows/{}", s("workflow")),
        format!("/workflows/{}/executions", s("workflow")),
        format!("/workflows/{}/executions/{}", s("workflow"), s("execution")),
        format!("/emails/{}", s("email")),
        "/domains".into(),
    ]
}

#[test]
fn every_fixture_layout_restores_into_a_server_that_reads_back_every_kind_of_record() {
    // On the PostgreSQL pass, restore unpacks into the data directory, upgrades it and
    // moves it into the directory's schema, where the server then reads it.
    let all = every_fixture();
    assert!(
        all.iter().any(|(layout, _, _)| *layout == keys::FORMAT),
        "a fixture of the current layout {} is committed (see the module's comment)",
        keys::FORMAT
    );
    for (layout, file, manifest) in all {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let answer = restore(&file, &dir);
        assert_eq!(
            (
                answer["backupKeyLayout"].as_u64(),
                answer["keyLayout"].as_u64()
            ),
            (Some(layout.into()), Some(keys::FORMAT.into())),
            "{answer}"
        );
        let app = TestApp::start(dir, keep_everything);
        assert_reads_back(&app, &manifest, &format!("layout {layout}"));
    }
}

/// Every answer the fixture recorded, as this server gives it now.
fn assert_reads_back(app: &TestApp, manifest: &Value, what: &str) {
    let secret = manifest["secretKey"].as_str().expect("the secret key");
    let reads = manifest["reads"].as_object().expect("the recorded reads");
    assert_eq!(reads.len(), paths(&manifest["ids"]).len(), "every kind");
    for (path, want) in reads {
        let r = app.get(path, secret);
        assert_eq!(r.status, 200, "{what}, {path}: {}", r.text);
        let mut diff = Vec::new();
        differences(want, &r.json(), "", &mut diff);
        assert!(diff.is_empty(), "{what}, {path}: {diff:#?}");
    }
}

/// The backup `file` as an older layout would have it: the header's layout and the
/// store's mark say `layout`, the records in `edits` have those values, and the trailer
/// is made again.
fn as_layout(file: &Path, layout: u32, edits: &[(Vec<u8>, Vec<u8>)], out: &Path) {
    let bytes = std::fs::read(file).unwrap();
    let mut records = Vec::new();
    let mut at = 32;
    while bytes[at] == b'R' {
        let len = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let (klen, vlen) = (len(at + 1), len(at + 5));
        let k = bytes[at + 9..at + 9 + klen].to_vec();
        let v = bytes[at + 9 + klen..at + 9 + klen + vlen].to_vec();
        records.push((k, v));
        at += 9 + klen + vlen;
    }
    let mut body = bytes[..32].to_vec();
    body[20..24].copy_from_slice(&layout.to_be_bytes());
    for (k, mut v) in records {
        if k == keys::FORMAT_KEY {
            v = layout.to_be_bytes().to_vec();
        }
        if let Some((_, edited)) = edits.iter().find(|(key, _)| *key == k) {
            v = edited.clone();
        }
        body.push(b'R');
        body.extend_from_slice(&(k.len() as u32).to_be_bytes());
        body.extend_from_slice(&(v.len() as u32).to_be_bytes());
        body.extend_from_slice(&k);
        body.extend_from_slice(&v);
    }
    body.extend_from_slice(&bytes[at..at + 9]);
    let crc = crc32fast::hash(&body);
    body.extend_from_slice(&crc.to_be_bytes());
    std::fs::write(out, body).unwrap();
}

#[test]
fn a_layout_5_backup_is_migrated_by_restore_recounting_ended_executions_and_reads_back_every_record(
) {
    if crate::support::postgres::skipped_on_postgres(
        "it upgrades sled data directories; a PostgreSQL store starts at the current layout",
    ) {
        return;
    }
    // Layout 5 is the layout-6 fixture with the one thing that differs made as layout 5
    // had it: a workflow's counter of ended executions that missed some.
    let (_, file, manifest) = every_fixture()
        .into_iter()
        .find(|(layout, _, _)| *layout == 6)
        .expect("the layout 6 fixture");
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("previous.mrbackup");
    let p: ProjectId = manifest["projectId"].as_str().unwrap().parse().unwrap();
    let w: WorkflowId = manifest["ids"]["workflow"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let counter = keys::counter(p, &keys::finished_executions(w));
    let miscounted = (counter.clone(), codec::encode_u64(0));
    as_layout(&file, 5, &[miscounted], &old);
    let dir = tmp.path().join("data");
    let answer = restore(&old, &dir);
    assert_eq!(answer["backupKeyLayout"], 5, "{answer}");
    {
        let store = SledStore::open(&dir, 8u64 << 20).expect("restore left the current layout");
        assert_eq!(
            store.get(&counter).unwrap().map(|b| codec::decode_u64(&b)),
            Some(1),
            "the workflow's one ended execution is counted"
        );
    }
    let app = TestApp::start(dir, keep_everything);
    assert_reads_back(&app, &manifest, "layout 5");
}

/// The restored fixture of the current layout, its mark then set to `layout` as a
/// stopped server leaves it; the data directory.
fn restored_and_marked(tmp: &Path, layout: u32) -> PathBuf {
    let (_, file, _) = every_fixture().pop().expect("a fixture");
    let dir = tmp.join("data");
    restore(&file, &dir);
    let (store, _) = SledStore::open_any_layout(&dir, 8u64 << 20).unwrap();
    let mut batch = Batch::new();
    batch.put(keys::FORMAT_KEY, layout.to_be_bytes().to_vec());
    store.apply(batch).unwrap();
    store.flush_blocking().unwrap();
    dir
}

#[test]
fn a_data_directory_of_layout_5_is_migrated_when_the_server_starts_on_it() {
    if crate::support::postgres::skipped_on_postgres(
        "it upgrades sled data directories; a PostgreSQL store starts at the current layout",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = restored_and_marked(tmp.path(), 5);
    let manifest = every_fixture().pop().unwrap().2;
    let mut app = TestApp::start(dir.clone(), keep_everything);
    assert_reads_back(&app, &manifest, "layout 5 at start");
    app.kill9();
    assert!(
        SledStore::open(&dir, 8u64 << 20).is_ok(),
        "the server left the current layout on disk"
    );
}

#[test]
fn a_data_directory_of_a_newer_layout_is_refused_naming_both_layouts_and_left_as_it_was() {
    if crate::support::postgres::skipped_on_postgres(
        "it upgrades sled data directories; a PostgreSQL store starts at the current layout",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = restored_and_marked(tmp.path(), keys::FORMAT + 1);
    let out = mailroom(&dir, &["project", "list"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("newer Mailroom")
            && stderr.contains(&format!("key layout {}", keys::FORMAT + 1))
            && stderr.contains(&format!("reads up to {}", keys::FORMAT)),
        "{stderr}"
    );
    assert!(
        SledStore::open_any_layout(&dir, 8u64 << 20).is_err(),
        "still refused: nothing was migrated"
    );
}

/// Makes the current layout's fixture through the API of a real server: contacts, a
/// template, a segment, a campaign sent through a real SMTP server with its stats, a
/// workflow with a completed execution, events, emails and a verified domain.
#[test]
#[ignore = "writes tests/fixtures: run by hand when the key layout changes (see the module's comment)"]
fn generate_the_fixture_of_the_current_layout() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let Project { secret, .. } = &p;
    for (email, plan, subscribed) in [
        ("ada@example.com", "pro", true),
        ("bob@example.com", "free", true),
        ("cyd@example.com", "pro", false),
    ] {
        app.upsert(
            secret,
            json!({"email": email, "subscribed": subscribed,
                   "data": {"plan": plan}}),
        );
    }
    let template = id(&data_or_plain(&app.post(
        "/templates",
        secret,
        json!({"name": "Welcome", "subject": "Welcome {{email}}", "body": "<p>Hello</p>",
               "type": "TRANSACTIONAL", "from": "hello@acme.test"}),
    )));
    let segment = id(&data_or_plain(&app.post(
        "/segments",
        secret,
        json!({"name": "Pro", "filters": {"operator": "AND", "conditions": [
            {"field": "data.plan", "operator": "equals", "value": "pro"}]}}),
    )));
    let campaign = id(&campaigns::create(
        &app,
        &p,
        json!({"name": "Spring", "type": "ALL"}),
    ));
    let (got, _) = send_and_settle(&app, &p, &smtp, &campaign, 2);
    let email = email_id_of(&got[0].text());
    let workflow = id(&data_or_plain(&app.post(
        "/workflows",
        secret,
        json!({"name": "Onboarding", "enabled": true, "triggerEvent": "signup",
               "steps": [{"id": "send", "type": "SEND_EMAIL",
                          "config": {"templateId": template}, "next": null}]}),
    )));
    let r = app.post(
        "/v1/track",
        secret,
        json!({"email": "ada@example.com", "event": "signup", "properties": {"from": "ad"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let list = eventually(
        30,
        || {
            app.get(&format!("/workflows/{workflow}/executions"), secret)
                .json()
        },
        |l: &Value| l["executions"][0]["status"] == "COMPLETED",
    );
    assert_eq!(list["executions"][0]["status"], "COMPLETED", "{list}");
    let execution = id(&list["executions"][0]);
    smtp.wait_for(3, std::time::Duration::from_secs(30));
    let ids = json!({"template": template, "segment": segment, "campaign": campaign,
                     "workflow": workflow, "execution": execution, "email": email});
    let mut reads = Map::new();
    for path in paths(&ids) {
        let r = app.get(&path, secret);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        reads.insert(path, stable(&r.json()));
    }
    let file = fixtures().join(format!("format-{}.mrbackup", keys::FORMAT));
    let _ = std::fs::remove_file(&file);
    succeeded(&mailroom(
        &app.data_dir,
        &["backup", "--out", file.to_str().unwrap()],
    ));
    let manifest = json!({"keyLayout": keys::FORMAT, "projectId": p.id, "secretKey": secret,
                          "publicKey": p.public, "ids": ids, "reads": reads});
    std::fs::write(
        file.with_extension("json"),
        serde_json::to_string_pretty(&manifest).unwrap() + "\n",
    )
    .unwrap();
}

/// The record of a 201: some resources answer `{success, data}`, others the record.
fn data_or_plain(r: &crate::support::app::Resp) -> Value {
    assert_eq!(r.status, 201, "{}", r.text);
    match r.json() {
        v if v["success"] == true => data(r, 201),
        v => v,
    }
}

#[test]
fn migrate_moves_a_sled_directory_with_every_kind_of_record_into_postgres_for_a_node_to_serve() {
    let Some(_) = crate::support::postgres::postgres_url() else {
        mailroom_testkit::skipped("migrating into PostgreSQL needs MAILROOM_TEST_POSTGRES_URL");
        return;
    };
    let sled = |s: &mut Setup| s.storage.backend = crate::support::settings::Backend::Sled;
    let (_, file, manifest) = every_fixture()
        .into_iter()
        .find(|(layout, _, _)| *layout == keys::FORMAT)
        .expect("a fixture of the current layout");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("laptop");
    succeeded(&crate::support::app::mailroom_with(
        &dir,
        &[
            "restore",
            file.to_str().unwrap(),
            "--data",
            dir.to_str().unwrap(),
        ],
        sled,
    ));
    let node = tmp.path().join("node");
    let url = crate::support::postgres::schema_url(&node).expect("the PostgreSQL pass");
    let migrate = || {
        crate::support::app::mailroom_with(
            &dir,
            &["migrate", "--to-postgres", &url, "--batch", "7"],
            sled,
        )
    };
    let moved = succeeded(&migrate());
    let kinds = moved["kinds"].as_object().expect("records per kind");
    for kind in [
        "projects",
        "api keys",
        "contacts",
        "templates",
        "campaigns",
        "workflows",
    ] {
        assert!(
            kinds.get(kind).and_then(Value::as_u64).unwrap_or(0) > 0,
            "{kind}: {moved}"
        );
    }
    assert_eq!(
        moved["records"].as_u64(),
        Some(kinds.values().filter_map(Value::as_u64).sum::<u64>()),
        "{moved}"
    );
    let again = migrate();
    assert!(!again.status.success(), "a second run into a full schema");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("holds data already"), "{stderr}");

    let app = TestApp::start(node, keep_everything);
    assert_reads_back(&app, &manifest, "migrated to PostgreSQL");
}
