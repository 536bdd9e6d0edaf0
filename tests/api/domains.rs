//! Sender domains, against a real DNS server on loopback.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::app::{Project, TestApp};
use mailroom_testkit::TestDns;

fn add_domain(app: &TestApp, p: &Project, domain: &str) -> Value {
    let r = app.post("/domains", &p.secret, json!({ "domain": domain }));
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

/// The published record of a purpose: (name, value).
fn record(domain: &Value, purpose: &str) -> (String, String) {
    let r = domain["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["purpose"] == purpose)
        .unwrap_or_else(|| panic!("no {purpose} record in {domain}"));
    (
        r["name"].as_str().unwrap().to_owned(),
        r["value"].as_str().unwrap().to_owned(),
    )
}

fn record_verified(domain: &Value, purpose: &str) -> bool {
    domain["records"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["purpose"] == purpose && r["verified"] == true)
}

/// Publishes the ownership and DKIM records exactly as the API asked.
fn publish(dns: &TestDns, domain: &Value) {
    for purpose in ["OWNERSHIP", "DKIM"] {
        let (name, value) = record(domain, purpose);
        dns.set_txt(&name, &[&value]);
    }
}

fn verify_now(app: &TestApp, p: &Project, id: &str) -> Value {
    let r = app.post(&format!("/domains/{id}/verify"), &p.secret, json!({}));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// Polls GET /domains/{id} until its status is `status` (the re-check runs every second).
fn wait_for_status(app: &TestApp, p: &Project, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = app.get(&format!("/domains/{id}"), &p.secret).json();
        if d["status"] == status {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "still {} instead of {status}",
            d["status"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn adding_a_domain_answers_201_with_the_records_to_publish_and_no_private_key() {
    let app = TestApp::spawn_with_dns(|_| {});
    let p = app.create_project("Acme");
    let r = app.post(
        "/domains",
        &p.secret,
        json!({"domain": "  Mail.Example.COM "}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let d = r.json();
    assert_eq!(d["domain"], "mail.example.com");
    assert_eq!(d["status"], "PENDING");
    assert_eq!(d["verified"], false);
    assert_eq!(d["verifiedAt"], Value::Null);
    assert!(d["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(
        !r.text.contains("PRIVATE KEY"),
        "the private key never leaves"
    );

    let (name, value) = record(&d, "OWNERSHIP");
    assert_eq!(name, "_mailroom.mail.example.com");
    assert!(value.starts_with("mailroom-verification="), "{value}");
    let (name, value) = record(&d, "DKIM");
    let selector = name.strip_suffix("._domainkey.mail.example.com").unwrap();
    assert!(
        selector.starts_with("mr") && selector.len() > 2,
        "{selector}"
    );
    let key = value.strip_prefix("v=DKIM1; k=rsa; p=").unwrap();
    assert!(
        key.len() > 300,
        "an RSA 2048 SubjectPublicKeyInfo in base64: {key}"
    );
    let (name, value) = record(&d, "SPF");
    assert_eq!(name, "mail.example.com");
    assert_eq!(value, "v=spf1 include:_spf.mailroom.local ~all");
    for r in d["records"].as_array().unwrap() {
        assert_eq!(r["type"], "TXT");
        assert_eq!(r["verified"], false);
    }
}

#[test]
fn a_domain_is_verified_by_post_verify_once_its_records_are_published() {
    let app = TestApp::spawn_with_dns(|_| {});
    let dns = app.dns();
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.com");
    let id = d["id"].as_str().unwrap();

    let before = verify_now(&app, &p, id);
    assert_eq!(
        before["verified"], false,
        "no records yet: 200 with verified false"
    );
    assert_eq!(before["status"], "PENDING");
    assert!(before["lastCheckedAt"].is_string());

    publish(dns, &d);
    dns.set_txt("example.com", &["v=spf1 include:_spf.mailroom.local ~all"]);
    let after = verify_now(&app, &p, id);
    assert_eq!(after["status"], "VERIFIED", "{after}");
    assert_eq!(after["verified"], true);
    assert!(after["verifiedAt"].as_str().unwrap().ends_with('Z'));
    for purpose in ["OWNERSHIP", "DKIM", "SPF"] {
        assert!(record_verified(&after, purpose), "{purpose}: {after}");
    }
    let listed = app.get("/domains?status=VERIFIED", &p.secret).json();
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["domains"][0]["id"], id);
}

#[test]
fn the_spf_record_is_advice_and_does_not_block_verification() {
    let app = TestApp::spawn_with_dns(|s| s.domains.spf_include = "ip4:192.0.2.7".into());
    let dns = app.dns();
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.net");
    assert_eq!(
        record(&d, "SPF").1,
        "v=spf1 ip4:192.0.2.7 ~all",
        "the configured include"
    );
    publish(dns, &d);
    let after = verify_now(&app, &p, d["id"].as_str().unwrap());
    assert_eq!(after["status"], "VERIFIED");
    assert!(!record_verified(&after, "SPF"));
    assert!(
        !record_verified(&after, "DMARC"),
        "no DMARC record does not block VERIFIED"
    );
}

#[test]
fn the_dmarc_record_is_advice_verified_by_any_dmarc_policy_once_published() {
    let app = TestApp::spawn_with_dns(|_| {});
    let dns = app.dns();
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.org");
    let (name, value) = record(&d, "DMARC");
    assert_eq!(name, "_dmarc.example.org");
    assert_eq!(value, "v=DMARC1; p=none; adkim=r; aspf=r");
    publish(dns, &d);
    // The owner's own policy, not the one advised, counts.
    dns.set_txt(
        "_dmarc.example.org",
        &["v=DMARC1; p=quarantine; rua=mailto:d@example.org"],
    );
    let id = d["id"].as_str().unwrap();
    let after = verify_now(&app, &p, id);
    assert_eq!(after["status"], "VERIFIED", "{after}");
    assert!(record_verified(&after, "DMARC"), "{after}");
    let listed = app.get("/domains", &p.secret).json();
    assert!(
        record_verified(&listed["domains"][0], "DMARC"),
        "the list reads it too: {listed}"
    );
    dns.set_txt("_dmarc.example.org", &["v=spf1 -all"]);
    let later = verify_now(&app, &p, id);
    assert!(!record_verified(&later, "DMARC"), "{later}");
    assert_eq!(later["status"], "VERIFIED", "and the domain stays VERIFIED");
}

#[test]
fn the_background_recheck_verifies_a_domain_and_fails_it_when_its_records_disappear() {
    let app = TestApp::spawn_with_dns(|s| s.domains.recheck_seconds = 1);
    let dns = app.dns();
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.org");
    let id = d["id"].as_str().unwrap();
    publish(dns, &d);
    let verified = wait_for_status(&app, &p, id, "VERIFIED");
    assert!(verified["verifiedAt"].is_string());

    let (dkim_name, _) = record(&d, "DKIM");
    dns.remove_txt(&dkim_name);
    let failed = wait_for_status(&app, &p, id, "FAILED");
    assert_eq!(failed["verified"], false);
    assert_eq!(failed["verifiedAt"], Value::Null);
    assert!(!record_verified(&failed, "DKIM"));
    assert!(record_verified(&failed, "OWNERSHIP"));

    publish(dns, &d);
    wait_for_status(&app, &p, id, "VERIFIED");
}

#[test]
fn a_dkim_record_with_another_key_fails_the_domain() {
    let app = TestApp::spawn_with_dns(|_| {});
    let dns = app.dns();
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.com");
    let (own_name, own_value) = record(&d, "OWNERSHIP");
    let (dkim_name, _) = record(&d, "DKIM");
    dns.set_txt(&own_name, &[&own_value]);
    dns.set_txt(
        &dkim_name,
        &["v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong"],
    );
    let after = verify_now(&app, &p, d["id"].as_str().unwrap());
    assert_eq!(after["status"], "FAILED", "{after}");
    assert!(record_verified(&after, "OWNERSHIP"));
    assert!(!record_verified(&after, "DKIM"));
    let failed = app.get("/domains?status=failed", &p.secret).json();
    assert_eq!(failed["total"], 1, "the status filter ignores case");
}

#[test]
fn adding_the_same_domain_twice_gives_409_but_another_project_may_add_it() {
    let app = TestApp::spawn_with_dns(|_| {});
    let dns = app.dns();
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let first = add_domain(&app, &a, "example.com");
    let r = app.post("/domains", &a.secret, json!({"domain": "EXAMPLE.com."}));
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.code(), "CONFLICT");

    let other = add_domain(&app, &b, "example.com");
    assert_ne!(
        record(&first, "DKIM").0,
        record(&other, "DKIM").0,
        "each has its own selector"
    );

    // Both projects publish at the same names; each one's records verify its own.
    publish(dns, &first);
    let (own_b, own_b_value) = record(&other, "OWNERSHIP");
    let (own_a, own_a_value) = record(&first, "OWNERSHIP");
    assert_eq!(own_a, own_b);
    dns.set_txt(&own_a, &[&own_a_value, &own_b_value]);
    let (dkim_b, dkim_b_value) = record(&other, "DKIM");
    dns.set_txt(&dkim_b, &[&dkim_b_value]);
    assert_eq!(
        verify_now(&app, &a, first["id"].as_str().unwrap())["status"],
        "VERIFIED"
    );
    assert_eq!(
        verify_now(&app, &b, other["id"].as_str().unwrap())["status"],
        "VERIFIED"
    );
}

#[test]
fn another_project_cannot_see_verify_or_delete_a_domain() {
    let app = TestApp::spawn_with_dns(|_| {});
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let d = add_domain(&app, &a, "example.com");
    let id = d["id"].as_str().unwrap();
    for r in [
        app.get(&format!("/domains/{id}"), &b.secret),
        app.post(&format!("/domains/{id}/verify"), &b.secret, json!({})),
        app.delete(&format!("/domains/{id}"), &b.secret),
    ] {
        assert_eq!(r.status, 404, "{}", r.text);
        assert_eq!(r.code(), "DOMAIN_NOT_FOUND");
    }
    let listed = app.get("/domains", &b.secret).json();
    assert_eq!(
        listed,
        json!({"domains": [], "cursor": null, "hasMore": false, "total": 0})
    );
    assert_eq!(
        app.get(&format!("/domains/{id}"), &a.secret).status,
        200,
        "still there"
    );
}

#[test]
fn deleting_a_domain_answers_204_and_then_it_is_gone_and_can_be_added_again() {
    let app = TestApp::spawn_with_dns(|_| {});
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.com");
    let id = d["id"].as_str().unwrap();
    let r = app.delete(&format!("/domains/{id}"), &p.secret);
    assert_eq!(r.status, 204);
    assert!(r.text.is_empty());
    assert_eq!(
        app.get(&format!("/domains/{id}"), &p.secret).code(),
        "DOMAIN_NOT_FOUND"
    );
    assert_eq!(app.delete(&format!("/domains/{id}"), &p.secret).status, 404);
    assert_eq!(
        app.delete("/domains/not-an-id", &p.secret).code(),
        "DOMAIN_NOT_FOUND"
    );
    let again = add_domain(&app, &p, "example.com");
    assert_ne!(again["id"], d["id"]);
}

#[test]
fn domains_list_newest_first_in_pages_and_filter_by_status() {
    let app = TestApp::spawn_with_dns(|_| {});
    let p = app.create_project("Acme");
    for d in ["a.example", "b.example", "c.example"] {
        add_domain(&app, &p, d);
    }
    let first = app.get("/domains?limit=2", &p.secret).json();
    let names: Vec<_> = first["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["domain"].clone())
        .collect();
    assert_eq!(names, [json!("c.example"), json!("b.example")]);
    assert_eq!(first["hasMore"], true);
    assert_eq!(first["total"], 3);
    let cursor = first["cursor"].as_str().unwrap();
    let second = app
        .get(&format!("/domains?limit=2&cursor={cursor}"), &p.secret)
        .json();
    assert_eq!(second["domains"][0]["domain"], "a.example");
    assert_eq!(second["hasMore"], false);
    assert_eq!(second["cursor"], Value::Null);

    assert_eq!(
        app.get("/domains?status=PENDING", &p.secret).json()["total"],
        3
    );
    assert_eq!(
        app.get("/domains?status=VERIFIED", &p.secret).json()["total"],
        0
    );
    let r = app.get("/domains?status=DONE", &p.secret);
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["error"]["errors"][0]["code"], "invalid_enum_value");
    assert_eq!(app.get("/domains?limit=0", &p.secret).status, 422);
    assert_eq!(app.get("/domains?cursor=nope", &p.secret).status, 422);
}

#[test]
fn invalid_domain_names_and_bad_bodies_are_refused() {
    let app = TestApp::spawn_with_dns(|_| {});
    let p = app.create_project("Acme");
    for bad in [
        "not a domain",
        "localhost",
        "-bad.com",
        "a..b.com",
        "https://x.com",
        "x_y.com",
        "10.0.0.1",
    ] {
        let r = app.post("/domains", &p.secret, json!({ "domain": bad }));
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
        let e = &r.json()["error"]["errors"][0];
        assert_eq!(
            (e["field"].as_str(), e["code"].as_str()),
            (Some("domain"), Some("invalid_string")),
            "{bad}"
        );
    }
    let cases = [
        (json!({}), "invalid_type"),
        (json!({"domain": 42}), "invalid_type"),
        (json!({"domain": ""}), "too_small"),
        (
            json!({"domain": format!("{}.com", "a".repeat(300))}),
            "too_big",
        ),
    ];
    for (body, code) in cases {
        let r = app.post("/domains", &p.secret, body.clone());
        assert_eq!(r.status, 422, "{body}");
        assert_eq!(r.json()["error"]["errors"][0]["code"], code, "{body}");
    }
    let r = app.request("POST", "/domains", Some(&p.secret), Some("{not json"));
    assert_eq!(r.status, 400);
    assert_eq!(
        app.post("/domains", &p.public, json!({"domain": "example.com"}))
            .code(),
        "FORBIDDEN"
    );
    assert_eq!(
        app.request("GET", "/domains", None, None).code(),
        "MISSING_AUTH"
    );
    assert_eq!(
        app.get("/domains", "sk_0000000000000000000000000000000000000000")
            .code(),
        "INVALID_API_KEY"
    );
}

#[test]
fn an_idn_domain_is_stored_and_published_as_punycode() {
    let app = TestApp::spawn_with_dns(|_| {});
    let dns = app.dns();
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "Bücher.example");
    assert_eq!(d["domain"], "xn--bcher-kva.example");
    assert_eq!(record(&d, "OWNERSHIP").0, "_mailroom.xn--bcher-kva.example");
    publish(dns, &d);
    assert_eq!(
        verify_now(&app, &p, d["id"].as_str().unwrap())["status"],
        "VERIFIED"
    );
}

#[test]
fn a_domain_check_that_dns_does_not_answer_changes_nothing_and_does_not_hang() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let app = TestApp::spawn_with(|s| {
        s.dns.nameservers = vec![addr.to_string()];
        s.dns.timeout_ms = 300;
    });
    let p = app.create_project("Acme");
    let d = add_domain(&app, &p, "example.com");
    let started = Instant::now();
    let after = verify_now(&app, &p, d["id"].as_str().unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(after["status"], "PENDING", "no answer is no evidence");
    assert!(after["lastCheckedAt"].is_string());
}

#[test]
fn openapi_describes_the_domain_and_verify_endpoints() {
    let app = TestApp::spawn();
    let doc = app.request("GET", "/openapi.json", None, None).json();
    for (path, method) in [
        ("/domains", "get"),
        ("/domains", "post"),
        ("/domains/{id}", "get"),
        ("/domains/{id}", "delete"),
        ("/domains/{id}/verify", "post"),
        ("/v1/verify", "post"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
    for schema in ["DomainView", "DomainList", "VerificationView"] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
}
