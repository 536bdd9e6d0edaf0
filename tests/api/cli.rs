//! The CLI: project commands on a stopped server's data directory.

use std::process::Command;

use serde_json::{json, Value};

use crate::helpers::{bin, test_config, TestApp};

fn mailroom(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(test_config())
        .env("MAILROOM__STORAGE__PATH", data)
        .output()
        .expect("run mailroom")
}

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
    assert!(v["publicKey"].as_str().unwrap().starts_with("pk_"));
    let id = v["id"].as_str().unwrap().to_owned();

    let list = mailroom(&data, &["project", "list"]);
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    let raw = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect::<Vec<_>>()
        .concat();
    assert!(
        !raw.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "keys are stored hashed"
    );

    let out = mailroom(&data, &["project", "disable", &id]);
    assert!(out.status.success());
    let out = mailroom(&data, &["project", "enable", &id]);
    assert!(out.status.success());
    let out = mailroom(&data, &["project", "rotate-keys", &id]);
    let rotated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(rotated["secretKey"], secret.as_str());
}

#[test]
fn project_commands_on_a_running_servers_data_give_a_clear_error() {
    let app = TestApp::spawn();
    let out = mailroom(&app.data_dir, &["project", "list"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
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
    let app = TestApp::start(data.clone(), &[]);
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
    let app = TestApp::spawn_with_dns(&[]);
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
        crate::helpers::ADMIN_TOKEN,
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
        crate::helpers::ADMIN_TOKEN,
        json!({"domain": "acme.example"}),
    );
    assert_eq!(r.status, 404, "{}", r.text);
}
