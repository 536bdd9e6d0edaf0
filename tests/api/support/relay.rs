//! A server that sends for a verified domain: its DNS records on the DNS server on
//! loopback, its mail through the SMTP server on loopback.

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::json;

use super::app::{Project, TestApp};
use super::settings::{self, Setup};

/// The domain the fixtures verify.
pub const DOMAIN: &str = "acme.test";

/// A server whose DNS is `dns`, with a project whose domain is verified there.
pub fn verified_app(dns: &TestDns, configure: impl FnOnce(&mut Setup)) -> (TestApp, Project) {
    let ns = dns.addr();
    let app = TestApp::spawn_with(|s| {
        s.dns.nameservers = vec![ns];
        configure(s);
    });
    let p = app.create_project("Acme");
    verify_domain(&app, dns, &p, DOMAIN);
    (app, p)
}

/// Adds `domain` to the project, publishes its records on `dns` and verifies it.
pub fn verify_domain(app: &TestApp, dns: &TestDns, p: &Project, domain: &str) {
    let r = app.post("/domains", &p.secret, json!({ "domain": domain }));
    assert_eq!(r.status, 201, "{}", r.text);
    let d = r.json();
    for rec in d["records"].as_array().unwrap() {
        if rec["purpose"] == "OWNERSHIP" || rec["purpose"] == "DKIM" {
            dns.set_txt(
                rec["name"].as_str().unwrap(),
                &[rec["value"].as_str().unwrap()],
            );
        }
    }
    let v = app.post(
        &format!("/domains/{}/verify", d["id"].as_str().unwrap()),
        &p.secret,
        json!({}),
    );
    assert_eq!(v.json()["status"], "VERIFIED", "{}", v.text);
}

/// A server that sends through `smtp`, unpaced, retrying quickly, with a verified domain.
pub fn app_with(
    dns: &TestDns,
    smtp: &SmtpServer,
    configure: impl FnOnce(&mut Setup),
) -> (TestApp, Project) {
    let port = smtp.port();
    verified_app(dns, |s| {
        settings::smtp_relay(s, port);
        configure(s);
    })
}
