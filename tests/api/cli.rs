//! The CLI: project commands on a stopped server's data directory.

use std::process::Command;

use serde_json::Value;

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
