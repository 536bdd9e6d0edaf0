//! The suppression list (API.md 28): its resource, and every kind of mail skipping a
//! suppressed address, through the real server and the test SMTP server on loopback.

use serde_json::{json, Value};

use crate::support::app::TestApp;
use crate::support::campaign::{
    contacts, count, create, emails, rcpts, rig, send_and_settle, wait, FROM,
};

fn listed(app: &TestApp, key: &str, query: &str) -> Value {
    let r = app.get(&format!("/suppressions{query}"), key);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

#[test]
fn an_address_added_by_hand_is_listed_newest_first_and_removed_once() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let first = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "Old@Example.com"}),
    );
    assert_eq!(first.status, 201, "{}", first.text);
    let made = first.json();
    assert_eq!(made["email"], "old@example.com", "{made}");
    assert_eq!(made["reason"], "manual", "{made}");
    assert_eq!(made["emailHash"].as_str().map(str::len), Some(64), "{made}");
    let again = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "old@example.com", "reason": "manual"}),
    );
    assert_eq!(again.status, 200, "already on the list: {}", again.text);
    let r = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "new@example.com"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);

    let all = listed(&app, &p.secret, "");
    let order: Vec<_> = all["suppressions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["email"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(order, ["new@example.com", "old@example.com"], "{all}");
    assert_eq!(
        (all["total"].as_u64(), all["hasMore"].as_bool()),
        (Some(2), Some(false)),
        "{all}"
    );
    let page = listed(&app, &p.secret, "?limit=1");
    assert_eq!(page["hasMore"], true, "{page}");
    let cursor = page["cursor"].as_str().unwrap().to_owned();
    let next = listed(&app, &p.secret, &format!("?limit=1&cursor={cursor}"));
    assert_eq!(
        next["suppressions"][0]["email"], "old@example.com",
        "{next}"
    );
    assert_eq!(listed(&app, &p.secret, "?reason=complaint")["total"], 0);

    let typo = app.get("/suppressions?reason=hard-bounce", &p.secret);
    assert_eq!(typo.status, 422, "{}", typo.text);
    assert!(
        typo.text.contains("hard_bounce"),
        "the error names the reason meant: {}",
        typo.text
    );
    let forged = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "x@example.com", "reason": "complaint"}),
    );
    assert_eq!(forged.status, 422, "only manual by hand: {}", forged.text);
    let bad = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "not an address"}),
    );
    assert_eq!(bad.status, 422, "{}", bad.text);
    assert_eq!(
        app.get("/suppressions", &p.public).status,
        403,
        "secret key only"
    );

    assert_eq!(
        app.delete("/suppressions/OLD@example.com", &p.secret)
            .status,
        204
    );
    assert_eq!(
        app.delete("/suppressions/old@example.com", &p.secret)
            .status,
        404
    );
    assert_eq!(listed(&app, &p.secret, "")["total"], 1);
    let other = app.create_project("Other");
    assert_eq!(
        listed(&app, &other.secret, "")["total"],
        0,
        "another project's list is its own"
    );
}

#[test]
fn a_send_to_a_suppressed_address_answers_suppressed_and_mails_only_the_others() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let r = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "gone@example.com"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let sent = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["gone@example.com", "here@example.com"], "from": FROM, "subject": "Hi", "body": "<p>Hi</p>"}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    let emails = sent.json()["data"]["emails"].clone();
    let gone = &emails[0];
    assert_eq!(gone["contact"]["email"], "gone@example.com", "{emails}");
    assert!(
        gone["email"].is_null(),
        "no email for a suppressed address: {emails}"
    );
    assert_eq!(
        (gone["suppressed"].as_bool(), gone["reason"].as_str()),
        (Some(true), Some("manual")),
        "{emails}"
    );
    assert!(emails[1]["email"].is_string(), "{emails}");
    let got = smtp.wait_for(1, wait());
    assert_eq!(rcpts(&got), ["here@example.com"]);
    // A campaign's test send to it is refused, saying why.
    let c = create(&app, &p, json!({}));
    let cid = c["id"].as_str().unwrap();
    let t = app.post(
        &format!("/campaigns/{cid}/test"),
        &p.secret,
        json!({"email": "gone@example.com"}),
    );
    assert_eq!(t.status, 409, "{}", t.text);
    assert!(t.text.contains("suppression list (manual)"), "{}", t.text);
    assert_eq!(smtp.count(), 1);
}

#[test]
fn a_campaign_skips_a_suppressed_subscriber_and_counts_it_skipped() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let all = emails("in", 3);
    contacts(&app, &p, &all, true);
    let r = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "in1@example.com"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let c = create(&app, &p, json!({}));
    let (got, s) = send_and_settle(&app, &p, &smtp, c["id"].as_str().unwrap(), 2);
    assert_eq!(rcpts(&got), ["in0@example.com", "in2@example.com"]);
    assert_eq!(
        (count(&s, "delivered"), count(&s, "skipped")),
        (2, 1),
        "{s}"
    );
    assert_eq!(smtp.count(), 2);
}

#[test]
fn deleting_the_contact_keeps_the_suppression_as_a_hash_and_it_still_applies() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let contact = app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "subscribed": true}),
    );
    let r = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "ada@example.com"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let hash = r.json()["emailHash"].clone();
    let id = contact["id"].as_str().unwrap();
    let d = app.delete(&format!("/contacts/{id}"), &p.secret);
    assert!(d.status == 202 || d.status == 204, "{}", d.text);
    let all = listed(&app, &p.secret, "");
    let entry = &all["suppressions"][0];
    assert!(entry["email"].is_null(), "the address is gone: {all}");
    assert_eq!(entry["emailHash"], hash, "{all}");
    assert!(!all.to_string().contains("ada@"), "{all}");
    let sent = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["ada@example.com", "bo@example.com"], "from": FROM, "subject": "Hi", "body": "<p>Hi</p>"}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    assert_eq!(
        sent.json()["data"]["emails"][0]["suppressed"],
        true,
        "{}",
        sent.text
    );
    let got = smtp.wait_for(1, wait());
    assert_eq!(rcpts(&got), ["bo@example.com"]);
}

#[test]
fn a_csv_from_another_provider_is_imported_with_its_reasons_and_its_bad_rows_named() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let csv = "email,reason,source\nA@example.com,complaint,old\nb@example.com,,old\nnope,manual,old\na@example.com,manual,dup\n";
    let r = app.request_with("POST", "/suppressions/import", Some(&p.secret), None, &[]);
    assert!(r.status >= 400, "an empty body is refused: {}", r.text);
    let r = crate::support::app::Resp::of(
        "POST",
        "/suppressions/import",
        ureq::post(&format!("{}/suppressions/import", app.base))
            .set("Authorization", &format!("Bearer {}", p.secret))
            .set("Content-Type", "text/csv")
            .send_string(csv),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(
        (v["added"].as_u64(), v["existing"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert_eq!(v["invalid"][0]["row"], 4, "{v}");
    let complaint = listed(&app, &p.secret, "?reason=complaint");
    assert_eq!(
        complaint["suppressions"][0]["email"], "a@example.com",
        "{complaint}"
    );
    assert_eq!(listed(&app, &p.secret, "?reason=manual")["total"], 1);
    assert_eq!(listed(&app, &p.secret, "")["total"], 2);
}

#[test]
fn an_email_queued_before_its_address_was_suppressed_fails_instead_of_going_out() {
    let (_dns, smtp, app, p) = rig(|s| s.sending.retry_base_ms = 200);
    // The relay defers everything, so the email waits for a retry.
    smtp.keep_refusing(mailroom_testkit::Stage::RcptTo, "451 4.3.0 Try again later");
    let sent = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "late@example.com", "from": FROM, "subject": "Hi", "body": "<p>Hi</p>"}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    let id = sent.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    crate::support::campaign::eventually(20, || smtp.refused(), |n| *n >= 1);
    let r = app.post(
        "/suppressions",
        &p.secret,
        json!({"email": "late@example.com"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    smtp.clear_refusals();
    let email = crate::support::campaign::eventually(
        20,
        || app.get(&format!("/emails/{id}"), &p.secret).json()["data"].clone(),
        |e: &Value| e["status"] != "QUEUED",
    );
    assert_eq!(email["status"], "FAILED", "{email}");
    assert!(
        email.to_string().contains("suppression list (manual)"),
        "{email}"
    );
    assert_eq!(smtp.count(), 0, "nothing reached the address");
}
