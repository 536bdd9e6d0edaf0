//! POST /v1/verify, against a real DNS server on loopback that serves the test zones.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::app::{Project, TestApp};

struct World {
    app: TestApp,
    p: Project,
}

/// Zones: personal providers, a disposable service, an alias service, an IDN domain, a
/// company domain, one without MX, one with a null MX; everything else is NXDOMAIN.
fn world() -> World {
    let app = TestApp::spawn_with_dns(|_| {});
    let dns = app.dns();
    for d in [
        "gmail.com",
        "mailinator.com",
        "privaterelay.appleid.com",
        "xn--bcher-kva.test",
        "acme.test",
    ] {
        dns.add_mail_domain(d);
    }
    dns.add_a("www.nomx.test", std::net::Ipv4Addr::new(192, 0, 2, 20));
    dns.set_txt("nomx.test", &["v=spf1 -all"]);
    dns.add_mx("nullmx.test", ".");
    let p = app.create_project("Acme");
    World { app, p }
}

impl World {
    fn verify(&self, email: &str) -> Value {
        let r = self
            .app
            .post("/v1/verify", &self.p.secret, json!({ "email": email }));
        assert_eq!(r.status, 200, "{email}: {}", r.text);
        let body = r.json();
        assert_eq!(body["success"], true);
        body["data"].clone()
    }
}

fn reasons(v: &Value) -> String {
    v["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[test]
fn a_personal_address_is_valid_with_every_field_present() {
    let w = world();
    let v = w.verify("Ada@Gmail.com");
    assert_eq!(
        v,
        json!({
            "email": "Ada@gmail.com",
            "valid": true,
            "isDisposable": false,
            "isAlias": false,
            "isTypo": false,
            "isPlusAddressed": false,
            "isPersonalEmail": true,
            "domainExists": true,
            "hasWebsite": true,
            "hasMxRecords": true,
            "reasons": [],
            "suggestedEmail": null,
        })
    );
    assert_eq!(
        w.verify("ada@gmail.com"),
        w.verify("ada@gmail.com"),
        "a cached answer is the same"
    );
}

#[test]
fn plus_addressing_is_detected_and_still_valid() {
    let w = world();
    let v = w.verify("ada+newsletter@gmail.com");
    assert_eq!(v["isPlusAddressed"], true);
    assert_eq!(v["valid"], true);
    let v = w.verify("ada@acme.test");
    assert_eq!(v["isPlusAddressed"], false);
    assert_eq!(v["isPersonalEmail"], false, "a company domain");
    assert_eq!(v["valid"], true);
}

#[test]
fn a_typo_of_a_well_known_domain_suggests_the_corrected_address() {
    let w = world();
    let v = w.verify("ada@gmial.com");
    assert_eq!(v["isTypo"], true);
    assert_eq!(v["suggestedEmail"], "ada@gmail.com");
    assert!(reasons(&v).contains("typo of gmail.com"), "{v}");
    let v = w.verify("ada@gmail.con");
    assert_eq!(v["suggestedEmail"], "ada@gmail.com");
    assert_eq!(v["valid"], false, "gmail.con does not exist");
    assert!(reasons(&v).contains("does not exist"), "{v}");
}

#[test]
fn a_disposable_domain_and_its_subdomains_are_disposable_but_may_be_valid() {
    let w = world();
    let v = w.verify("temp@mailinator.com");
    assert_eq!(v["isDisposable"], true);
    assert_eq!(v["valid"], true, "disposable is not invalid");
    assert!(reasons(&v).contains("disposable"), "{v}");
    let v = w.verify("temp@x.mailinator.com");
    assert_eq!(v["isDisposable"], true, "a parent on the list counts");
}

#[test]
fn an_alias_service_is_an_alias_and_not_disposable() {
    let w = world();
    let v = w.verify("abc123@privaterelay.appleid.com");
    assert_eq!(v["isAlias"], true);
    assert_eq!(v["isDisposable"], false);
    assert_eq!(v["valid"], true);
    assert!(reasons(&v).contains("alias"), "{v}");
}

#[test]
fn a_domain_without_mx_records_is_not_valid_and_says_why() {
    let w = world();
    let v = w.verify("ada@nomx.test");
    assert_eq!(v["domainExists"], true);
    assert_eq!(v["hasMxRecords"], false);
    assert_eq!(v["hasWebsite"], true, "www. has an A record");
    assert_eq!(v["valid"], false);
    assert!(reasons(&v).contains("no MX records"), "{v}");

    let v = w.verify("ada@nullmx.test");
    assert_eq!(v["hasMxRecords"], false);
    assert_eq!(v["valid"], false);
    assert!(reasons(&v).contains("null MX"), "{v}");
}

#[test]
fn a_domain_that_does_not_exist_is_not_valid() {
    let w = world();
    let v = w.verify("ada@no-such-domain.test");
    assert_eq!(v["domainExists"], false);
    assert_eq!(v["hasMxRecords"], false);
    assert_eq!(v["hasWebsite"], false);
    assert_eq!(v["valid"], false);
    assert_eq!(v["isTypo"], false);
    assert!(reasons(&v).contains("does not exist"), "{v}");
}

#[test]
fn an_idn_address_is_checked_through_punycode() {
    let w = world();
    let v = w.verify("ada@Bücher.test");
    assert_eq!(v["email"], "ada@bücher.test");
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(v["hasMxRecords"], true);
}

#[test]
fn a_syntax_problem_is_a_reason_and_not_an_error() {
    let w = world();
    let v = w.verify("ada..lovelace@gmail.com");
    assert_eq!(v["valid"], false);
    assert_eq!(v["domainExists"], true, "the domain is still checked");
    assert!(reasons(&v).contains("two dots"), "{v}");
    let v = w.verify("ada@[192.0.2.1]");
    assert_eq!(v["valid"], false);
    assert!(reasons(&v).contains("literal"), "{v}");
}

#[test]
fn what_is_not_an_address_or_not_a_request_is_refused() {
    let w = world();
    let (app, sk) = (&w.app, &w.p.secret);
    for bad in ["not an email", "ada", "ada@", "@gmail.com"] {
        let r = app.post("/v1/verify", sk, json!({ "email": bad }));
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
        let e = &r.json()["error"]["errors"][0];
        assert_eq!(
            (e["field"].as_str(), e["code"].as_str()),
            (Some("email"), Some("invalid_string"))
        );
    }
    for (body, code) in [
        (json!({}), "invalid_type"),
        (json!({"email": 42}), "invalid_type"),
        (json!({"email": ""}), "too_small"),
        (
            json!({"email": format!("{}@gmail.com", "a".repeat(2000))}),
            "too_big",
        ),
    ] {
        let r = app.post("/v1/verify", sk, body.clone());
        assert_eq!(r.status, 422, "{body}");
        assert_eq!(r.json()["error"]["errors"][0]["code"], code, "{body}");
    }
    assert_eq!(
        app.request("POST", "/v1/verify", Some(sk), Some("nope"))
            .code(),
        "BAD_REQUEST"
    );
    let r = app.post("/v1/verify", &w.p.public, json!({"email": "ada@gmail.com"}));
    assert_eq!(r.code(), "FORBIDDEN", "a secret-key endpoint");
    let r = app.request(
        "POST",
        "/v1/verify",
        None,
        Some(r#"{"email":"ada@gmail.com"}"#),
    );
    assert_eq!(r.code(), "MISSING_AUTH");
}

#[test]
fn answers_are_cached_for_their_ttl_and_negative_answers_too() {
    let w = world();
    let v = w.verify("ada@later.test");
    assert_eq!(v["domainExists"], false);
    w.app.dns().add_mail_domain("later.test");
    let v = w.verify("ada@later.test");
    assert_eq!(
        v["domainExists"], false,
        "NXDOMAIN is cached for the SOA minimum (60 s)"
    );

    // What a TTL means, measured rather than raced: while it runs the answer is the
    // cached one, and the new one shows only once it ran out. (A busy machine may take
    // longer than the TTL between two requests; then the first check has nothing to
    // say, and the second still holds.)
    const TTL: Duration = Duration::from_secs(2);
    w.app
        .dns()
        .add_mail_domain_with_ttl("short.test", TTL.as_secs() as u32);
    let asked = Instant::now();
    assert_eq!(w.verify("ada@short.test")["hasMxRecords"], true);
    w.app.dns().remove_mx("short.test");
    let again = w.verify("ada@short.test");
    if asked.elapsed() < TTL {
        assert_eq!(again["hasMxRecords"], true, "cached: {again}");
    }
    let v = crate::support::campaign::eventually(
        30,
        || w.verify("ada@short.test"),
        |v| v["hasMxRecords"] == false,
    );
    assert_eq!(v["hasMxRecords"], false, "the TTL ran out: {v}");
    assert!(
        asked.elapsed() >= TTL,
        "the removal showed after {:?}, before the {TTL:?} TTL ran out",
        asked.elapsed()
    );
    assert_eq!(v["domainExists"], true);
}

#[test]
fn a_nameserver_that_never_answers_gives_a_result_within_the_timeout() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let app = TestApp::spawn_with(|s| {
        s.dns.nameservers = vec![addr.to_string()];
        s.dns.timeout_ms = 300;
    });
    let p = app.create_project("Acme");
    let started = Instant::now();
    let r = app.post("/v1/verify", &p.secret, json!({"email": "ada@gmail.com"}));
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{}", r.text);
    let v = &r.json()["data"];
    assert_eq!(v["valid"], false);
    assert_eq!(v["isPersonalEmail"], true, "the lists still answer");
    assert!(
        reasons(v).contains("DNS did not answer within 300 ms"),
        "{v}"
    );
    assert!(
        !reasons(v).contains("does not exist"),
        "no answer is not NXDOMAIN: {v}"
    );
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} with a 300 ms DNS timeout"
    );
}
