//! Server settings for the bench, and a verified sender domain through the real API.

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::json;

use crate::client;
use crate::server::Server;

pub const DOMAIN: &str = "acme.test";

pub fn env(
    dns: &TestDns,
    smtp: &SmtpServer,
    rate: u32,
    smtp_connections: usize,
) -> Vec<(String, String)> {
    let workers = 4usize;
    [
        ("MAILROOM__MAIL__TRANSPORT", "smtp".to_owned()),
        ("MAILROOM__SMTP__HOST", "127.0.0.1".to_owned()),
        ("MAILROOM__SMTP__PORT", smtp.port().to_string()),
        ("MAILROOM__DNS__NAMESERVERS", dns.addr()),
        ("MAILROOM__SENDING__RATE_PER_SECOND", rate.to_string()),
        ("MAILROOM__MAILER__WORKERS", workers.to_string()),
        (
            "MAILROOM__SMTP__POOL_SIZE",
            (smtp_connections / workers).max(1).to_string(),
        ),
        (
            "MAILROOM__SENDING__MAX_IN_FLIGHT",
            smtp_connections.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

pub fn verify_domain(rt: &tokio::runtime::Runtime, server: &Server, dns: &TestDns) {
    let key = Some(server.secret_key.as_str());
    let body = json!({"domain": DOMAIN}).to_string();
    let (status, d) = rt.block_on(client::call(
        server.addr(),
        "POST",
        "/domains",
        key,
        Some(body),
    ));
    assert_eq!(status, 201, "adding the bench domain: {d}");
    // The test DNS server runs its own runtime: edit it outside ours.
    for r in d["records"].as_array().expect("records") {
        if r["purpose"] == "OWNERSHIP" || r["purpose"] == "DKIM" {
            dns.set_txt(
                r["name"].as_str().unwrap_or_default(),
                &[r["value"].as_str().unwrap_or_default()],
            );
        }
    }
    let path = format!("/domains/{}/verify", d["id"].as_str().unwrap_or_default());
    let (_, v) = rt.block_on(client::call(
        server.addr(),
        "POST",
        &path,
        key,
        Some("{}".into()),
    ));
    assert_eq!(v["status"], "VERIFIED", "verifying the bench domain: {v}");
}
