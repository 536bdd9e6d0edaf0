//! Delivery through a real SMTP server on loopback: what arrives, retries, bounces,
//! a relay that goes away, `kill -9` with emails in the outbox, and TLS to the relay
//! (STARTTLS, implicit TLS, a relay without STARTTLS, a certificate nobody trusts).

use std::time::Duration;

use mailroom_testkit::{Auth, SmtpServer, Stage, TlsMode};
use serde_json::json;

use crate::dns::TestDns;
use crate::support::app::{Project, TestApp};
use crate::support::campaign::{
    contact_of, control, email_record, eventually, header_of, rcpts, wait,
};
use crate::support::relay::{app_with, verified_app, verify_domain};
use crate::support::settings::SmtpTls;

/// Verifies the DKIM signature the way a receiver does (mail-auth), with the public key
/// looked up in the test DNS server where the domain's records were published.
fn dkim_passes(dns: &TestDns, raw: &[u8]) -> bool {
    use mail_auth::hickory_resolver::config::{
        NameServerConfigGroup, ResolverConfig, ResolverOpts,
    };
    use mail_auth::{AuthenticatedMessage, DkimResult, MessageAuthenticator};
    let addr: std::net::SocketAddr = dns.addr().parse().expect("dns address");
    let servers = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
    let auth = MessageAuthenticator::new(
        ResolverConfig::from_parts(None, vec![], servers),
        ResolverOpts::default(),
    )
    .expect("resolver");
    let message = AuthenticatedMessage::parse(raw).expect("a parsable message");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let outputs = rt.block_on(auth.verify_dkim(&message));
    outputs
        .iter()
        .any(|o| matches!(o.result(), DkimResult::Pass))
}

/// Polls GET /emails/{id} (for up to 5 s) until its status is `status`; the last record.
fn email_when(app: &TestApp, p: &Project, id: &str, status: &str) -> serde_json::Value {
    let mut email = json!(null);
    for _ in 0..100 {
        email = app.get(&format!("/emails/{id}"), &p.secret).json()["data"].clone();
        if email["status"] == status {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    email
}

#[test]
fn a_send_arrives_rendered_with_from_reply_to_custom_headers_and_a_dkim_signature() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "data": {"name": "Ada", "plan": "free"}}),
    );
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": {"name": "Ada L", "email": "ada@example.com"}, "from": {"name": "Acme", "email": "hello@acme.test"},
               "subject": "Hi {{name}}", "body": "<p>Plan {{ data.plan }} {{ missing }}</p>", "data": {"plan": "pro <b>"},
               "reply": "help@acme.test", "headers": {"X-Campaign": "spring"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let data = &r.json()["data"];
    assert_eq!(data["emails"][0]["contact"]["email"], "ada@example.com");
    let email_id = data["emails"][0]["email"].as_str().unwrap().to_owned();
    let got = smtp.wait_for(1, wait());
    assert_eq!(got.len(), 1);
    let m = got[0].text();
    assert_eq!(got[0].rcpt_to, ["ada@example.com"]);
    assert_eq!(got[0].mail_from, "hello@acme.test");
    assert_eq!(header_of(&m, "Subject").as_deref(), Some("Hi Ada"));
    assert!(
        header_of(&m, "From").unwrap().contains("Acme")
            && header_of(&m, "From").unwrap().contains("hello@acme.test")
    );
    assert!(header_of(&m, "To").unwrap().contains("ada@example.com"));
    assert_eq!(header_of(&m, "Reply-To").as_deref(), Some("help@acme.test"));
    assert_eq!(header_of(&m, "X-Campaign").as_deref(), Some("spring"));
    assert!(
        m.contains("Plan pro &lt;b&gt;"),
        "call data wins and is escaped: {m}"
    );
    let dkim = header_of(&m, "DKIM-Signature").expect("signed");
    assert!(
        dkim.contains("d=acme.test") && dkim.contains("c=relaxed/relaxed"),
        "{dkim}"
    );
    assert!(
        dkim_passes(&dns, &got[0].data),
        "the signature verifies against the published key"
    );
    assert_eq!(email_when(&app, &p, &email_id, "SENT")["status"], "SENT");
}

#[test]
fn every_form_of_to_gets_its_own_email_naming_only_that_recipient() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["one@example.com", {"name": "Two", "email": "two@example.com"}], "from": "a@acme.test", "subject": "s", "body": "b"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "three@example.com", "from": "a@mail.acme.test", "subject": "s", "body": "b"}),
    );
    assert_eq!(
        r.status, 200,
        "a subdomain of a verified domain may send: {}",
        r.text
    );
    let got = smtp.wait_for(3, wait());
    let mut rcpts: Vec<String> = got.iter().map(|m| m.rcpt_to.join(",")).collect();
    rcpts.sort();
    assert_eq!(
        rcpts,
        ["one@example.com", "three@example.com", "two@example.com"]
    );
    for m in &got {
        let to = header_of(&m.text(), "To").unwrap().to_owned();
        assert!(to.contains(&m.rcpt_to[0]) && !to.contains(','), "{to}");
    }
    let contacts = app.get("/contacts", &p.secret).json();
    assert_eq!(contacts["total"], 3, "each recipient became a contact");
    assert_eq!(
        contacts["contacts"][0]["subscribed"], false,
        "new recipients are not subscribed by default"
    );
}

#[test]
fn an_attachment_arrives_as_a_mime_part_with_its_filename() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "a@acme.test", "subject": "s", "body": "b",
               "attachments": [{"filename": "report.txt", "content": "aGVsbG8gd29ybGQ=", "contentType": "text/plain"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let m = smtp.wait_for(1, wait())[0].text();
    assert!(m.contains("multipart/mixed"), "{m}");
    assert!(
        m.contains("filename=\"report.txt\"") || m.contains("filename=report.txt"),
        "{m}"
    );
    assert!(
        m.contains("aGVsbG8gd29ybGQ=") || m.contains("hello world"),
        "{m}"
    );
}

#[test]
fn a_server_that_answers_451_twice_gets_the_email_on_the_third_attempt() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    smtp.script(&[451, 451]);
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "a@acme.test", "subject": "s", "body": "b"}),
    );
    let id = r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(smtp.wait_for(1, wait()).len(), 1);
    let email = email_when(&app, &p, &id, "SENT");
    assert_eq!(email["status"], "SENT");
    assert_eq!(email["attempts"], 3);
}

#[test]
fn a_550_bounces_the_email_and_unsubscribes_the_contact() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    smtp.script(&[550]);
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let c = app.upsert(&p.secret, json!({"email": "dead@example.com"}));
    assert_eq!(c["subscribed"], true);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "dead@example.com", "from": "a@acme.test", "subject": "s", "body": "b"}),
    );
    let id = r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let email = email_when(&app, &p, &id, "BOUNCED");
    assert_eq!(email["status"], "BOUNCED");
    assert!(email["lastError"].as_str().unwrap().contains("550"));
    let contact = app
        .get(
            &format!("/contacts/{}", c["id"].as_str().unwrap()),
            &p.secret,
        )
        .json();
    assert_eq!(
        contact["subscribed"], false,
        "a bounced address is suppressed"
    );
    assert!(smtp.received().is_empty());
}

#[test]
fn a_marketing_template_is_not_sent_to_an_unsubscribed_contact() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    app.upsert(
        &p.secret,
        json!({"email": "out@example.com", "subscribed": false}),
    );
    app.upsert(
        &p.secret,
        json!({"email": "in@example.com", "subscribed": true}),
    );
    let t = app.post("/templates", &p.secret, json!({"name": "News", "subject": "News for {{email}}", "body": "b", "type": "MARKETING", "from": "news@acme.test"})).json();
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["out@example.com", "in@example.com"], "template": t["id"]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let emails = r.json()["data"]["emails"].clone();
    assert_eq!(emails[0]["skipped"], "unsubscribed");
    assert!(emails[0]["email"].is_null());
    assert!(emails[1]["email"].is_string());
    let got = smtp.wait_for(1, wait());
    assert_eq!(got.len(), 1);
    assert_eq!(
        header_of(&got[0].text(), "Subject").as_deref(),
        Some("News for in@example.com"),
        "the template's subject and from are used"
    );
    control(&app, &p, &smtp, "control@example.com");
    let got = smtp.received();
    assert_eq!(rcpts(&got), ["control@example.com", "in@example.com"]);
}

#[test]
fn the_relay_going_away_and_coming_back_loses_nothing() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let addr = smtp.addr();
    let (app, p) = app_with(&dns, &smtp, |s| s.sending.max_attempts = 20);
    smtp.stop();
    drop(smtp);
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = app.post("/v1/send", &p.secret, json!({"to": format!("u{i}@example.com"), "from": "a@acme.test", "subject": "s", "body": "b"}));
        assert_eq!(r.status, 200);
        ids.push(
            r.json()["data"]["emails"][0]["email"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Every email has tried the missing relay and failed at least once.
    for id in &ids {
        let failed_once = |e: &serde_json::Value| e["attempts"].as_u64() >= Some(1);
        let email = eventually(30, || email_record(&app, &p, id), failed_once);
        assert!(failed_once(&email), "{email}");
    }
    let back = SmtpServer::start_on(addr);
    let got = back.wait_for(5, Duration::from_secs(60));
    assert_eq!(got.len(), 5);
}

#[test]
fn kill_9_right_after_200_acknowledged_sends_still_delivers_all_200_after_a_restart() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (mut app, p) = app_with(&dns, &smtp, |_| {});
    std::thread::scope(|s| {
        for t in 0..4 {
            let (app, key) = (&app, &p.secret);
            s.spawn(move || {
                for i in 0..50 {
                    let r = app.post("/v1/send", key, json!({"to": format!("k{t}-{i}@example.com"), "from": "a@acme.test", "subject": "s", "body": "b"}));
                    assert_eq!(r.status, 200);
                }
            });
        }
    });
    app.kill9();
    app.restart();
    let mut seen = std::collections::HashSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < 200 && std::time::Instant::now() < deadline {
        seen = smtp
            .received()
            .iter()
            .map(|m| m.rcpt_to[0].clone())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(seen.len(), 200, "every acknowledged email arrived");
    let total = smtp.received().len();
    assert!(
        total < 200 + 64,
        "at most the emails in flight at the kill arrive twice ({total})"
    );
}

#[test]
fn the_default_file_transport_writes_an_eml_file_per_email() {
    let dns = TestDns::start();
    let (app, p) = verified_app(&dns, |s| s.sending.rate_per_second = 0);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "a@acme.test", "subject": "File me", "body": "b"}),
    );
    let id = r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = app.data_dir.join("outbox").join(format!("{id}.eml"));
    for _ in 0..100 {
        if path.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&path).expect("the .eml file");
    assert!(text.contains("Subject: File me"));
}

#[test]
fn an_idempotent_replay_answers_the_first_reply_and_sends_once() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let body =
        json!({"to": "once@example.com", "from": "a@acme.test", "subject": "s", "body": "b"})
            .to_string();
    let key = [("Idempotency-Key", "order-42")];
    let first = app.request_with("POST", "/v1/send", Some(&p.secret), Some(&body), &key);
    assert_eq!(first.status, 200, "{}", first.text);
    let again = app.request_with("POST", "/v1/send", Some(&p.secret), Some(&body), &key);
    assert_eq!(again.status, 200);
    assert_eq!(
        again.json()["data"]["emails"],
        first.json()["data"]["emails"],
        "the same email id"
    );
    let other =
        json!({"to": "other@example.com", "from": "a@acme.test", "subject": "s", "body": "b"})
            .to_string();
    let clash = app.request_with("POST", "/v1/send", Some(&p.secret), Some(&other), &key);
    assert_eq!((clash.status, clash.code().as_str()), (409, "CONFLICT"));
    smtp.wait_for(1, wait());
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        rcpts(&smtp.received()),
        ["control@example.com", "once@example.com"],
        "sent once"
    );
}

/// Queues one email to `to` and answers its id.
fn send_one(app: &TestApp, p: &Project, to: &str) -> String {
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": "a@acme.test", "subject": "Over TLS", "body": "b"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Writes the CA that signed `smtp`'s certificate into `dir`, for smtp.tls_ca_file.
fn ca_file(smtp: &SmtpServer, dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("relay-ca.pem");
    std::fs::write(&path, smtp.ca_pem().expect("a TLS test server")).expect("write the CA");
    path.to_string_lossy().into_owned()
}

#[test]
fn starttls_delivers_over_tls_to_a_relay_whose_ca_is_in_tls_ca_file() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start_tls(TlsMode::Starttls));
    let dir = tempfile::tempdir().unwrap();
    let ca = ca_file(&smtp, &dir);
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.tls = SmtpTls::Starttls;
        s.smtp.tls_ca_file = ca;
    });
    let id = send_one(&app, &p, "tls@example.com");
    let got = smtp.wait_for(1, wait());
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].rcpt_to, ["tls@example.com"]);
    assert!(got[0].tls, "the message came after STARTTLS, not in clear");
    assert!(dkim_passes(&dns, &got[0].data), "still DKIM-signed");
    assert_eq!(email_when(&app, &p, &id, "SENT")["status"], "SENT");
}

#[test]
fn implicit_tls_delivers_over_tls_checking_the_certificate_against_tls_server_name() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start_tls(TlsMode::Implicit));
    let dir = tempfile::tempdir().unwrap();
    let ca = ca_file(&smtp, &dir);
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.tls = SmtpTls::Tls;
        s.smtp.tls_ca_file = ca;
        s.smtp.tls_server_name = "localhost".into();
    });
    let ids: Vec<String> = (0..3)
        .map(|i| send_one(&app, &p, &format!("tls{i}@example.com")))
        .collect();
    let got = smtp.wait_for(3, wait());
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|m| m.tls), "every message came over TLS");
    for id in &ids {
        assert_eq!(email_when(&app, &p, id, "SENT")["status"], "SENT");
    }
}

#[test]
fn starttls_to_a_relay_that_does_not_offer_it_sends_nothing_in_clear() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.tls = SmtpTls::Starttls;
        s.sending.max_attempts = 2;
    });
    let id = send_one(&app, &p, "secret@example.com");
    let email = email_when(&app, &p, &id, "FAILED");
    assert_eq!(email["status"], "FAILED", "{email}");
    assert_eq!(
        email["attempts"], 2,
        "a transient failure, retried: {email}"
    );
    let error = email["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("STARTTLS"), "{error}");
    assert!(smtp.received().is_empty(), "nothing went in clear");
}

#[test]
fn a_relay_whose_certificate_is_not_trusted_gets_nothing_and_the_error_names_the_certificate() {
    for (mode, tls) in [
        (TlsMode::Implicit, SmtpTls::Tls),
        (TlsMode::Starttls, SmtpTls::Starttls),
    ] {
        let (dns, smtp) = (TestDns::start(), SmtpServer::start_tls(mode));
        let (app, p) = app_with(&dns, &smtp, |s| {
            s.smtp.tls = tls;
            s.sending.max_attempts = 2;
        });
        let id = send_one(&app, &p, "nobody@example.com");
        let email = email_when(&app, &p, &id, "FAILED");
        assert_eq!(email["status"], "FAILED", "{tls:?}: {email}");
        let error = email["lastError"].as_str().unwrap_or_default();
        assert!(error.contains("certificate"), "{tls:?}: {error}");
        assert!(smtp.received().is_empty(), "{tls:?}: nothing was sent");
    }
}

#[test]
fn an_email_in_an_smtp_attempt_reads_sending_and_then_its_outcome() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    // A relay that accepts the connection and never greets: the attempt stays under
    // way until smtp.timeout_ms.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.port = port;
        s.smtp.timeout_ms = 1500;
        s.sending.max_attempts = 1;
    });
    let id = send_one(&app, &p, "slow@example.com");
    let during = email_when(&app, &p, &id, "SENDING");
    assert_eq!(during["status"], "SENDING", "{during}");
    let after = email_when(&app, &p, &id, "FAILED");
    assert_eq!(after["status"], "FAILED", "{after}");
    assert!(
        after["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("timed out"),
        "{after}"
    );
    drop(silent);
}

#[test]
fn mail_whose_domain_stops_being_verified_waits_instead_of_leaving_unsigned() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.sending.retry_base_ms = 1500;
        s.sending.max_attempts = 3;
    });
    smtp.script(&[451]);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": "hello@acme.test", "subject": "s", "body": "b"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    // The first attempt meets a 451; before the retry, the domain goes away.
    let mut email = json!(null);
    for _ in 0..100 {
        email = app.get(&format!("/emails/{id}"), &p.secret).json()["data"].clone();
        if email["attempts"] == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(email["attempts"], 1, "{email}");
    let domains = app.get("/domains", &p.secret).json();
    let domain = domains["domains"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.delete(&format!("/domains/{domain}"), &p.secret).status,
        204
    );
    let waited = email_when(&app, &p, &id, "FAILED");
    assert_eq!(waited["status"], "FAILED", "{waited}");
    assert!(
        waited["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("never sent unsigned"),
        "{waited}"
    );
    assert_eq!(smtp.count(), 0, "nothing left unsigned");
}

#[test]
fn a_relay_that_hangs_at_login_times_out_and_the_email_is_retried_not_bounced() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    smtp.auth(Auth::Hang);
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.username = "mailroom".into();
        s.smtp.password = "secret".into();
        s.smtp.timeout_ms = 300;
        s.sending.max_attempts = 2;
    });
    let id = send_one(&app, &p, "ada@example.com");
    let email = email_when(&app, &p, &id, "FAILED");
    assert_eq!(email["status"], "FAILED", "{email}");
    assert_eq!(email["attempts"], 2, "{email}");
    assert!(
        email["lastError"]
            .as_str()
            .unwrap()
            .contains("AUTH timed out"),
        "{email}"
    );
    let contact = &app.get("/contacts", &p.secret).json()["contacts"][0];
    assert_eq!(
        contact["subscribed"], false,
        "unchanged: a new /v1/send recipient starts unsubscribed"
    );
    assert_eq!(app.get("/health", &p.secret).status, 200);
}

#[test]
fn a_refused_relay_login_is_retried_and_never_bounces_the_recipient() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    smtp.auth(Auth::Refuse);
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.username = "mailroom".into();
        s.smtp.password = "wrong".into();
        s.sending.max_attempts = 2;
    });
    app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "subscribed": true}),
    );
    let id = send_one(&app, &p, "ada@example.com");
    let email = email_when(&app, &p, &id, "FAILED");
    assert_eq!(email["status"], "FAILED", "not BOUNCED: {email}");
    assert!(
        email["lastError"]
            .as_str()
            .unwrap()
            .contains("relay authentication failed"),
        "{email}"
    );
    let contact = &app.get("/contacts", &p.secret).json()["contacts"][0];
    assert_eq!(
        contact["subscribed"], true,
        "the recipient is not unsubscribed"
    );
    // With the login fixed, mail flows.
    smtp.auth(Auth::Accept);
    let id = send_one(&app, &p, "ada@example.com");
    assert_eq!(email_when(&app, &p, &id, "SENT")["status"], "SENT");
    assert_eq!(smtp.count(), 1);
}

#[test]
fn a_full_project_mailbox_during_delivery_still_sends_each_email_once() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| s.actors.mailbox_capacity = 2);
    let mut ids = Vec::new();
    for i in 0..40 {
        let to: Vec<String> = (0..5).map(|j| format!("r{i}-{j}@example.com")).collect();
        // The mailbox is tiny, so the send itself may be told to come back.
        let mut r = app.post(
            "/v1/send",
            &p.secret,
            json!({"to": to, "from": "hello@acme.test", "subject": "s", "body": "b"}),
        );
        for _ in 0..200 {
            if r.status != 503 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
            r = app.post(
                "/v1/send",
                &p.secret,
                json!({"to": to, "from": "hello@acme.test", "subject": "s", "body": "b"}),
            );
        }
        assert_eq!(r.status, 200, "{}", r.text);
        for e in r.json()["data"]["emails"].as_array().unwrap() {
            ids.push(e["email"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(ids.len(), 200);
    for id in &ids {
        assert_eq!(email_when(&app, &p, id, "SENT")["status"], "SENT", "{id}");
    }
    let got = smtp.received();
    let mut recipients: Vec<_> = got.iter().map(|m| m.rcpt_to.join(",")).collect();
    recipients.sort();
    let total = recipients.len();
    recipients.dedup();
    assert_eq!(
        (total, recipients.len()),
        (200, 200),
        "every recipient exactly once"
    );
}

/// Bytes written to the write-ahead log so far (its files' lengths).
fn wal_bytes(app: &TestApp) -> u64 {
    std::fs::read_dir(app.data_dir.join("wal"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_sends_attachments_are_stored_once_and_reach_every_recipient() {
    use base64::Engine;
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let file = "attachment line\n".repeat(65_536); // 1 MiB
    let content = base64::engine::general_purpose::STANDARD.encode(&file);
    let to: Vec<String> = (0..50).map(|i| format!("r{i}@example.com")).collect();
    let before = wal_bytes(&app);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": "hello@acme.test", "subject": "s", "body": "b",
               "attachments": [{"filename": "big.txt", "content": content, "contentType": "text/plain"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let written = wal_bytes(&app) - before;
    assert!(
        written < 4 << 20,
        "50 recipients of a 1 MiB file wrote {written} bytes of log: it is kept once"
    );
    let got = smtp.wait_for(50, wait());
    assert_eq!(got.len(), 50);
    for m in &got {
        let text = m.text();
        assert!(text.contains("big.txt"), "every recipient gets the file");
    }
    for e in r.json()["data"]["emails"].as_array().unwrap() {
        let id = e["email"].as_str().unwrap();
        assert_eq!(email_when(&app, &p, id, "SENT")["status"], "SENT");
    }
}

#[test]
fn replays_of_send_and_track_are_byte_for_byte_the_first_answer() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let send =
        json!({"to": "once@example.com", "from": "a@acme.test", "subject": "s", "body": "b"})
            .to_string();
    let track = json!({"email": "once@example.com", "event": "signup"}).to_string();
    for (path, body) in [("/v1/send", &send), ("/v1/track", &track)] {
        let key = [("Idempotency-Key", "same-request")];
        let first = app.request_with("POST", path, Some(&p.secret), Some(body), &key);
        assert_eq!(first.status, 200, "{}", first.text);
        // Time passes between the two, so a fresh timestamp would differ.
        std::thread::sleep(Duration::from_millis(20));
        let again = app.request_with("POST", path, Some(&p.secret), Some(body), &key);
        assert_eq!(again.status, 200);
        assert_eq!(
            again.text, first.text,
            "{path}: the replay is the first answer"
        );
    }
}

#[test]
fn sixty_emails_paced_at_14_per_second_never_put_15_in_one_second() {
    // The limiter leaves 20 ms of SMTP arrival jitter; on a 2-core machine the database
    // server's own processes, busy with the other tests' commits, took the mailers off the
    // CPU for longer than that in 3 of 6 runs (pacing itself is the dispatcher's, the same
    // on either backend).
    if crate::support::postgres::skipped_on_postgres(
        "arrival jitter beyond the limiter's 20 ms margin when PostgreSQL shares the cores",
    ) {
        return;
    }
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| s.sending.rate_per_second = 14);
    for batch in 0..3 {
        let to: Vec<String> = (0..20)
            .map(|i| format!("r{batch}-{i}@example.com"))
            .collect();
        let r = app.post(
            "/v1/send",
            &p.secret,
            json!({"to": to, "from": "a@acme.test", "subject": "s", "body": "b"}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let got = smtp.wait_for(60, Duration::from_secs(30));
    assert_eq!(got.len(), 60);
    let mut at: Vec<_> = got.iter().map(|m| m.at).collect();
    at.sort();
    // Every window of 0.9 s, starting at each arrival, holds at most 14: the pace hands
    // an email over every 72.9 ms, so 14 take 947 ms and a 15th comes 20 ms past the
    // second; arrivals jitter by more than that on a loaded 2-core machine, so the window
    // keeps 120 ms of margin for it, and a burst (many emails close together) still
    // shows. The span below checks the rate over the whole run.
    for (i, start) in at.iter().enumerate() {
        let within = at[i..]
            .iter()
            .take_while(|t| t.duration_since(*start) < Duration::from_millis(900))
            .count();
        assert!(
            within <= 14,
            "{within} emails within 0.9 s from arrival {i}; arrivals (ms): {:?}",
            at.iter()
                .map(|t| t.duration_since(at[0]).as_millis())
                .collect::<Vec<_>>()
        );
    }
    let span = at[59].duration_since(at[0]);
    assert!(
        span >= Duration::from_secs(4),
        "60 at 14/s take over 4 s, not {span:?}"
    );
}

#[test]
fn two_projects_are_paced_each_at_its_own_rate_at_the_same_time() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, a) = app_with(&dns, &smtp, |s| s.sending.rate_per_second = 14);
    let b = app.create_project("Beta");
    verify_domain(&app, &dns, &b, "beta.test");
    for (p, from, tag) in [(&a, "a@acme.test", "a"), (&b, "b@beta.test", "b")] {
        let to: Vec<String> = (0..42).map(|i| format!("{tag}-{i}@example.com")).collect();
        let r = app.post(
            "/v1/send",
            &p.secret,
            json!({"to": to, "from": from, "subject": "s", "body": "b"}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let got = smtp.wait_for(84, Duration::from_secs(60));
    assert_eq!(got.len(), 84);
    let arrivals = |of: &dyn Fn(&str) -> bool| {
        let mut at: Vec<_> = got
            .iter()
            .filter(|m| of(&m.rcpt_to[0]))
            .map(|m| m.at)
            .collect();
        at.sort();
        at
    };
    // Each project is paced: its 42 emails take 41 gaps of at least 1/14 s (arrival
    // times, unlike their gaps, barely feel the load of the machine).
    for tag in ["a-", "b-"] {
        let at = arrivals(&|r| r.starts_with(tag));
        let span = at[41].duration_since(at[0]);
        assert!(
            span >= Duration::from_millis(2_500),
            "{tag}: 42 in {span:?}"
        );
    }
    // Paced apart, not as one: both went out in the same seconds.
    let all = arrivals(&|_| true);
    let both = (0..all.len())
        .map(|i| {
            all[i..]
                .iter()
                .take_while(|t| t.duration_since(all[i]) < Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    assert!(
        both > 14,
        "at most {both} in any second: the projects shared one pace"
    );
}

#[test]
fn only_the_recipients_own_refusal_is_a_bounce() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| s.sending.max_attempts = 2);
    let subscribe = |email: &str| {
        app.upsert(&p.secret, json!({"email": email, "subscribed": true}));
    };
    // A 5xx to RCPT TO: the recipient is refused, a bounce that unsubscribes.
    subscribe("gone@example.com");
    smtp.refuse(Stage::RcptTo, "550 5.1.1 No such user");
    let id = send_one(&app, &p, "gone@example.com");
    assert_eq!(email_when(&app, &p, &id, "BOUNCED")["status"], "BOUNCED");
    assert_eq!(
        contact_of(&app, &p, "gone@example.com")["subscribed"],
        false
    );

    // 5.7.1 at RCPT TO: the relay refuses us (Postfix says "Relay access denied" there),
    // a relay fault retried, not a bounce.
    subscribe("relayed@example.com");
    smtp.refuse(Stage::RcptTo, "554 5.7.1 Relay access denied");
    let id = send_one(&app, &p, "relayed@example.com");
    let email = email_when(&app, &p, &id, "SENT");
    assert_eq!(
        (email["status"].as_str(), email["attempts"].as_i64()),
        (Some("SENT"), Some(2)),
        "{email}"
    );
    assert_eq!(
        contact_of(&app, &p, "relayed@example.com")["subscribed"],
        true
    );

    // 5.2.x after DATA: the mailbox, also the recipient's.
    subscribe("full@example.com");
    smtp.refuse(Stage::EndOfData, "552 5.2.2 Mailbox full");
    let id = send_one(&app, &p, "full@example.com");
    assert_eq!(email_when(&app, &p, &id, "BOUNCED")["status"], "BOUNCED");

    // 5.7.1 after DATA: the content is refused, not the address: FAILED, still subscribed.
    subscribe("strict@example.com");
    smtp.refuse(Stage::EndOfData, "554 5.7.1 Message rejected as spam");
    let id = send_one(&app, &p, "strict@example.com");
    let email = email_when(&app, &p, &id, "FAILED");
    assert_eq!(
        (email["status"].as_str(), email["attempts"].as_i64()),
        (Some("FAILED"), Some(1)),
        "{email}"
    );
    assert_eq!(
        contact_of(&app, &p, "strict@example.com")["subscribed"],
        true
    );
    assert_eq!(smtp.count(), 1, "only the relayed email, on its retry");
}

#[test]
fn a_relay_that_refuses_our_sender_or_data_is_a_relay_fault_retried_and_counted() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| s.sending.max_attempts = 3);
    app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "subscribed": true}),
    );
    smtp.refuse(Stage::MailFrom, "550 5.7.1 Sender not allowed");
    smtp.refuse(Stage::Data, "554 5.3.0 DATA refused");
    let id = send_one(&app, &p, "ada@example.com");
    let email = email_when(&app, &p, &id, "SENT");
    assert_eq!(
        email["status"], "SENT",
        "retried past both refusals: {email}"
    );
    assert_eq!(email["attempts"], 3, "{email}");
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], true);
    assert_eq!(smtp.count(), 1);
    let metrics = app.request("GET", "/metrics", None, None).text;
    assert!(
        metrics.contains(r#"mailroom_relay_faults_total{class="refused_5xx"} 2"#),
        "{metrics}"
    );

    // A sender the relay keeps refusing fails with the reason in lastError.
    for _ in 0..3 {
        smtp.refuse(Stage::MailFrom, "550 5.7.1 Sender not allowed");
    }
    let id = send_one(&app, &p, "ada@example.com");
    let email = email_when(&app, &p, &id, "FAILED");
    assert!(
        email["lastError"].as_str().unwrap().contains("MAIL FROM"),
        "{email}"
    );
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], true);
}

#[test]
fn a_retry_due_in_an_hour_goes_out_when_the_clock_is_moved_past_it() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| s.sending.retry_base_ms = 3600000);
    smtp.script(&[451]);
    let id = send_one(&app, &p, "later@example.com");
    // The attempt's outcome is written before the email leaves the mailer's hands, so
    // the record reads SENDING for a moment after `attempts` reaches 1.
    let email = eventually(
        10,
        || email_record(&app, &p, &id),
        |e| e["attempts"] == 1 && e["status"] != "SENDING",
    );
    assert_eq!(
        (email["attempts"].as_i64(), email["status"].as_str()),
        (Some(1), Some("QUEUED")),
        "{email}"
    );
    assert_eq!(smtp.count(), 0, "the retry is an hour away");
    let moved = app.post(
        "/admin/clock/advance",
        crate::support::app::ADMIN_TOKEN,
        json!({"ms": 3_600_000}),
    );
    assert_eq!(moved.status, 200, "{}", moved.text);
    // No sleeping through the hour: the dispatcher reads the moved clock.
    let got = smtp.wait_for(1, Duration::from_secs(10));
    assert_eq!(
        got.len(),
        1,
        "sent once the clock passed the retry's due time"
    );
    assert_eq!(email_when(&app, &p, &id, "SENT")["attempts"], 2);
    let r = app.post("/admin/clock/advance", &p.secret, json!({"ms": 1}));
    assert_eq!(r.status, 401, "only the operator moves the clock");
}

/// The classification table, reply by reply, after the message's final dot: only a
/// status that describes the recipient's address or mailbox is a bounce (and
/// unsubscribes); a bad sender (5.1.7, 5.1.8), a message too large for the system
/// (5.2.3) and a bare 5xx without an enhanced status fail the email and leave the
/// contact subscribed.
#[test]
fn after_data_only_an_address_or_mailbox_status_is_a_bounce() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |_| {});
    let table = [
        ("550 5.1.1 No such user", "BOUNCED", false),
        ("552 5.2.2 Mailbox full", "BOUNCED", false),
        ("550 5.1.7 Bad sender address syntax", "FAILED", true),
        ("550 5.1.8 Bad sender's system address", "FAILED", true),
        (
            "552 5.2.3 Message length exceeds administrative limit",
            "FAILED",
            true,
        ),
        ("554 Transaction failed", "FAILED", true),
    ];
    for (i, (reply, status, subscribed)) in table.into_iter().enumerate() {
        let to = format!("row{i}@example.com");
        app.upsert(&p.secret, json!({"email": to, "subscribed": true}));
        smtp.refuse(Stage::EndOfData, reply);
        let id = send_one(&app, &p, &to);
        let email = email_when(&app, &p, &id, status);
        assert_eq!(email["status"], status, "{reply}: {email}");
        assert_eq!(
            contact_of(&app, &p, &to)["subscribed"],
            subscribed,
            "{reply}: the contact's subscription"
        );
    }
    assert_eq!(smtp.count(), 0, "every message was refused");
}
