//! `storage.postgres.tls` against a real PostgreSQL with `ssl = on` and a certificate of
//! the test run's own CA (`.ci/postgres.sh`): `verify-full` with that CA in `ca_file`
//! serves and its connections are encrypted; without the CA it refuses to start, naming
//! the certificate; `require` encrypts and takes the certificate as it is. Only on the
//! PostgreSQL pass.

use std::process::Command;

use serde_json::json;

use crate::support::app::{refused_start, TestApp};
use crate::support::postgres::{postgres_url, tls_schema_url};
use crate::support::settings::PostgresTls;

/// Connections of Mailroom processes that the server sees encrypted, and in all.
fn encrypted_connections() -> (u64, u64) {
    let out = Command::new("psql")
        .args([
            "-qAt",
            "-d",
            &postgres_url().expect("the PostgreSQL pass"),
            "-c",
        ])
        .arg(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name LIKE 'mailroom %' \
             AND a.client_addr IS NOT NULL",
        )
        .output()
        .expect("run psql");
    let text = String::from_utf8_lossy(&out.stdout);
    let (a, b) = text.trim().split_once('|').expect("two counts");
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn verify_full_with_the_servers_ca_serves_over_encrypted_connections() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let Some((url, ca)) = tls_schema_url(&data) else {
        mailroom_testkit::skipped("needs MAILROOM_TEST_POSTGRES_TLS_URL and _CA (.ci/postgres.sh)");
        return;
    };
    let app = TestApp::start(data, |s| {
        s.storage.postgres.url = url;
        s.storage.postgres.tls = PostgresTls::VerifyFull;
        s.storage.postgres.ca_file = ca;
    });
    let p = app.create_project("Acme");
    let r = app.post("/contacts", &p.secret, json!({"email": "ada@example.com"}));
    assert_eq!(r.status, 201, "{}", r.text);
    let (encrypted, all) = encrypted_connections();
    assert!(
        encrypted > 0,
        "no encrypted connection: {encrypted} of {all}"
    );
    assert_eq!(
        encrypted, all,
        "every TCP connection of a node is encrypted"
    );
}

#[test]
fn verify_full_without_the_ca_refuses_to_start_naming_the_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((url, _)) = tls_schema_url(&tmp.path().join("data")) else {
        mailroom_testkit::skipped("needs MAILROOM_TEST_POSTGRES_TLS_URL and _CA (.ci/postgres.sh)");
        return;
    };
    let stderr = refused_start(|s| {
        s.storage.postgres.url = url;
        s.storage.postgres.tls = PostgresTls::VerifyFull;
        s.storage.postgres.statement_timeout_ms = 2_000;
    });
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
}

#[test]
fn require_encrypts_and_takes_the_certificate_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let Some((url, _)) = tls_schema_url(&data) else {
        mailroom_testkit::skipped("needs MAILROOM_TEST_POSTGRES_TLS_URL and _CA (.ci/postgres.sh)");
        return;
    };
    let app = TestApp::start(data, |s| {
        s.storage.postgres.url = url;
        s.storage.postgres.tls = PostgresTls::Require;
    });
    let p = app.create_project("Acme");
    let r = app.get("/contacts", &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
}
