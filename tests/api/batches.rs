//! One write message, one atomic batch: a send to many recipients, a bounce and an
//! unsubscribe link each apply exactly one (`mailroom_store_batches_total`), and an
//! idempotent replay of a send renders nothing (`mailroom_emails_rendered_total`).
//!
//! Each test reads a counter before and after one request, with nothing else writing
//! meanwhile: no delivery outcome is due (a relay that never greets, or mail already
//! delivered) and no campaign is running.

use std::net::TcpListener;

use mailroom_testkit::SmtpServer;
use serde_json::{json, Value};

use crate::dns::TestDns;
use crate::support::app::{Project, TestApp};
use crate::support::campaign::{
    contact_of, contacts, count, create, emails, eventually, header_of, id, link_path, rig,
    send_and_settle, visit,
};
use crate::support::relay::app_with;

/// The value of an engine counter on /metrics.
fn metric(app: &TestApp, name: &str) -> u64 {
    let text = app.request("GET", "/metrics", None, None).text;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} on /metrics:\n{text}"))
}

fn batches(app: &TestApp) -> u64 {
    metric(app, "mailroom_store_batches_total")
}

fn events_named(app: &TestApp, p: &Project, name: &str) -> Value {
    app.get(&format!("/events?name={name}&limit=100"), &p.secret)
        .json()
}

/// A server whose relay accepts connections and never greets, so no delivery outcome
/// is recorded while a test counts; the servers it needs live as long as the tuple.
fn silent_app() -> ((TestDns, SmtpServer, TcpListener), TestApp, Project) {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (app, p) = app_with(&dns, &smtp, |s| {
        s.smtp.port = port;
        s.smtp.timeout_ms = 120_000;
    });
    ((dns, smtp, silent), app, p)
}

#[test]
fn a_send_to_100_recipients_applies_one_batch_with_every_contact_email_and_event() {
    let (_servers, app, p) = silent_app();
    let known = emails("known", 50);
    contacts(&app, &p, &known, false);
    let mut to = known.clone();
    to.extend(emails("new", 50));

    let before = batches(&app);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": "a@acme.test", "subject": "Hi {{email}}", "body": "b", "subscribed": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(batches(&app) - before, 1, "one batch for the whole send");

    let queued = r.json()["data"]["emails"].as_array().unwrap().clone();
    assert_eq!(queued.len(), 100);
    assert!(queued.iter().all(|e| e["email"].is_string()), "{queued:?}");
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 100);
    let subscribed = events_named(&app, &p, "contact.subscribed");
    assert_eq!(
        subscribed["total"], 50,
        "each known contact's change is recorded in that batch: {subscribed}"
    );
    assert_eq!(contact_of(&app, &p, "new7@example.com")["subscribed"], true);
}

#[test]
fn an_address_listed_twice_in_one_send_is_one_new_contact_with_two_emails() {
    let (_servers, app, p) = silent_app();
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["twice@example.com", {"email": "twice@example.com", "name": "T"}],
               "from": "a@acme.test", "subject": "s", "body": "b", "subscribed": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let queued = r.json()["data"]["emails"].clone();
    assert_eq!(
        queued[0]["contact"]["id"], queued[1]["contact"]["id"],
        "{queued}"
    );
    assert_ne!(queued[0]["email"], queued[1]["email"], "{queued}");
    let list = app.get("/contacts", &p.secret).json();
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["contacts"][0]["subscribed"], true, "{list}");
}

#[test]
fn a_send_past_the_contact_limit_writes_no_contact_and_no_email() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, |s| s.limits.max_contacts = 3);
    app.upsert(&p.secret, json!({"email": "known@example.com"}));
    let before = batches(&app);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["known@example.com", "n1@example.com", "n2@example.com", "n3@example.com"],
               "from": "a@acme.test", "subject": "s", "body": "b"}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "CONFLICT"),
        "{}",
        r.text
    );
    assert!(r.text.contains("max_contacts"), "{}", r.text);
    assert_eq!(batches(&app), before, "nothing was applied");
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 1);
    assert_eq!(metric(&app, "mailroom_emails_queued_total"), 0);
}

#[test]
fn a_bounce_applies_one_batch_with_the_email_the_contact_and_their_events() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    smtp.script(&[550]);
    let (app, p) = app_with(&dns, &smtp, |_| {});
    app.upsert(&p.secret, json!({"email": "dead@example.com"}));

    let before = batches(&app);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "dead@example.com", "from": "a@acme.test", "subject": "s", "body": "b"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let unsubscribed = eventually(
        20,
        || events_named(&app, &p, "contact.unsubscribed"),
        |e: &Value| e["total"] == 1,
    );
    assert_eq!(unsubscribed["total"], 1, "{unsubscribed}");
    assert_eq!(unsubscribed["events"][0]["data"]["reason"], "bounce");
    assert_eq!(events_named(&app, &p, "email.bounce")["total"], 1);
    assert_eq!(
        batches(&app) - before,
        2,
        "one batch for the send and one for the bounce"
    );
    assert_eq!(
        contact_of(&app, &p, "dead@example.com")["subscribed"],
        false
    );
}

#[test]
fn an_unsubscribe_link_applies_one_batch_with_the_contact_the_campaigns_count_and_the_event() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &["ada@example.com".to_owned()], true);
    let cid = id(&create(&app, &p, json!({})));
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 1);
    let list = header_of(&got[0].text(), "List-Unsubscribe").expect("List-Unsubscribe");
    let path = link_path(&list, "/unsubscribe/").expect("an unsubscribe link");

    let before = batches(&app);
    let r = visit(&app, "POST", &path, Some("List-Unsubscribe=One-Click"));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(batches(&app) - before, 1, "one batch for the unsubscribe");
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);
    let stats = app
        .get(&format!("/campaigns/{cid}/stats"), &p.secret)
        .json();
    assert_eq!(count(&stats["data"], "unsubscribed"), 1, "{stats}");
    let events = events_named(&app, &p, "contact.unsubscribed");
    assert_eq!(events["total"], 1, "{events}");

    let again = visit(&app, "POST", &path, Some("List-Unsubscribe=One-Click"));
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        batches(&app) - before,
        1,
        "a second use of the link writes nothing"
    );
}

#[test]
fn an_idempotent_replay_of_a_send_renders_nothing_and_loads_no_template() {
    let (_servers, app, p) = silent_app();
    let t = app
        .post(
            "/templates",
            &p.secret,
            json!({"name": "Hi", "subject": "Hi {{email}}", "body": "b", "from": "a@acme.test"}),
        )
        .json();
    let body =
        json!({"to": ["a@example.com", "b@example.com", "c@example.com"], "template": t["id"]})
            .to_string();
    let key = [("Idempotency-Key", "welcome-1")];
    let rendered = || metric(&app, "mailroom_emails_rendered_total");

    let before = rendered();
    let first = app.request_with("POST", "/v1/send", Some(&p.secret), Some(&body), &key);
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(rendered() - before, 3, "the counter counts renders");

    // With its template gone, only a lookup can still answer the first reply.
    let deleted = app.delete(&format!("/templates/{}", id(&t)), &p.secret);
    assert!(deleted.status < 300, "{}", deleted.text);
    let (batches_before, rendered_before) = (batches(&app), rendered());
    let again = app.request_with("POST", "/v1/send", Some(&p.secret), Some(&body), &key);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.text, first.text, "the first answer, byte for byte");
    assert_eq!(rendered(), rendered_before, "a replay renders nothing");
    assert_eq!(batches(&app), batches_before, "a replay writes nothing");
}
