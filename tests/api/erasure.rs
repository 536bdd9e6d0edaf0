//! Erasure (issue #24): deleting a contact removes its personal data from the whole
//! store (events, emails' addresses and content, workflow executions and waits, segment
//! memberships, remembered answers), keeps its emails in the campaign stats, sends it
//! nothing afterwards, and finishes after a `kill -9` mid-way. The store is read after
//! the server stops, key by key and value by value, for the address's bytes.

use std::time::{Duration, Instant};

use mailroom_testkit::SmtpServer;
use serde_json::{json, Value};

use crate::support::app::{Project, TestApp};
use crate::support::campaign::{self as campaigns, advance, control, count, data, id, rig};
use crate::support::store::store_copies_of;

const FROM: &str = "hello@acme.test";
/// Distinctive, so that any copy of it in the store is found.
const VICTIM: &str = "zelda.erasure.q7x@example.com";
const KEEP: &str = "keeper.q7x@example.com";
const HOUR_MS: i64 = 3_600_000;

/// A contact with everything a contact can leave behind: events, a workflow execution
/// waiting for an event, a STATIC segment membership, a transactional email (sent with
/// an Idempotency-Key) and a campaign email. Answers (contact id, campaign id).
fn a_contact_with_a_history(app: &TestApp, p: &Project, smtp: &SmtpServer) -> (String, String) {
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"name": "Nudge", "subject": "Still there?", "body": "<p>Nudge</p>",
               "type": "TRANSACTIONAL", "from": FROM}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let nudge = id(&r.json());
    let w = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "Follow-up", "enabled": true, "triggerEvent": "signup",
               "allowReentry": false, "steps": [
                 {"id": "wait", "type": "WAIT_FOR_EVENT",
                  "config": {"eventName": "purchase", "timeoutSeconds": 3600},
                  "next": null, "timeoutNext": "nudge"},
                 {"id": "nudge", "type": "SEND_EMAIL", "config": {"templateId": nudge}, "next": null}]}),
    );
    assert_eq!(w.status, 201, "{}", w.text);
    let wid = id(&w.json());
    for email in [VICTIM, KEEP] {
        let r = app.post(
            "/v1/track",
            &p.secret,
            json!({"email": email, "event": "signup",
            "data": {"plan": "pro"}}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let contact = campaigns::contact_of(app, p, VICTIM)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = campaigns::eventually(
        30,
        || {
            app.get(&format!("/workflows/{wid}/executions?limit=100"), &p.secret)
                .json()
        },
        |v: &Value| {
            v["executions"]
                .as_array()
                .is_some_and(|xs| xs.iter().filter(|x| x["status"] == "WAITING").count() == 2)
        },
    );
    assert!(
        waiting["executions"].as_array().unwrap().len() == 2,
        "both contacts wait for a purchase: {waiting}"
    );
    let s = app.post(
        "/segments",
        &p.secret,
        json!({"name": "VIPs", "type": "STATIC"}),
    );
    assert_eq!(s.status, 201, "{}", s.text);
    let members = format!("/segments/{}/members", id(&s.json()));
    let r = app.post(&members, &p.secret, json!({"emails": [VICTIM, KEEP]}));
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app.request_with(
        "POST",
        "/v1/send",
        Some(&p.secret),
        Some(
            &json!({"to": VICTIM, "from": FROM, "subject": format!("Receipt for {VICTIM}"),
                     "body": format!("<p>Dear {VICTIM}</p>"), "text": "Dear {{email}}"})
            .to_string(),
        ),
        &[("Idempotency-Key", "receipt-1")],
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let c = campaigns::create(app, p, json!({"subject": "Spring for {{email}}"}));
    let cid = id(&c);
    let (_, stats) = campaigns::send_and_settle(app, p, smtp, &cid, 2);
    assert_eq!(count(&stats, "delivered"), 2, "{stats}");
    control(app, p, smtp, KEEP);
    (contact, cid)
}

fn mails_to(smtp: &SmtpServer, to: &str) -> usize {
    smtp.received()
        .iter()
        .filter(|m| m.rcpt_to.iter().any(|r| r == to))
        .count()
}

#[test]
fn deleting_a_contact_erases_its_address_from_every_key_and_value_of_the_store() {
    let (_dns, smtp, mut app, p) = rig(|_| {});
    let (contact, cid) = a_contact_with_a_history(&app, &p, &smtp);
    let sent_before = mails_to(&smtp, VICTIM);
    assert_eq!(
        sent_before, 2,
        "the receipt and the campaign reached the contact"
    );

    let r = app.delete(&format!("/contacts/{contact}"), &p.secret);
    assert_eq!(
        r.status, 204,
        "a small contact is erased at once: {}",
        r.text
    );
    let stats = data(&app.get(&format!("/campaigns/{cid}/stats"), &p.secret), 200);
    assert_eq!(
        count(&stats, "delivered"),
        2,
        "the campaign still counts the erased contact's email: {stats}"
    );

    app.kill9();
    assert_eq!(store_copies_of(&app.data_dir, VICTIM), Vec::<String>::new());
    assert!(
        !store_copies_of(&app.data_dir, KEEP).is_empty(),
        "the search finds an address the store does keep"
    );

    // The timeout of the erased contact's wait would have sent it the nudge.
    app.restart();
    advance(&app, 2 * HOUR_MS);
    let nudged = campaigns::eventually(30, || mails_to(&smtp, KEEP), |n| *n >= 3);
    assert!(
        nudged >= 3,
        "the kept contact's wait timed out and nudged it"
    );
    control(&app, &p, &smtp, "control.q7x@example.com");
    assert_eq!(
        mails_to(&smtp, VICTIM),
        sent_before,
        "nothing was sent to the erased contact after its delete"
    );
}

#[test]
fn an_erasure_queued_in_slices_finishes_after_a_kill_9_mid_way() {
    let (_dns, smtp, mut app, p) = rig(|s| s.erasure.slice = 1);
    let (contact, _) = a_contact_with_a_history(&app, &p, &smtp);

    let r = app.delete(&format!("/contacts/{contact}"), &p.secret);
    assert_eq!(
        r.status, 202,
        "one record a slice cannot finish at once: {}",
        r.text
    );
    assert_eq!(r.json()["erasure"], "queued", "{}", r.text);
    app.kill9();

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut left = store_copies_of(&app.data_dir, VICTIM);
    assert!(
        !left.is_empty(),
        "the queued erasure holds the address until it ends"
    );
    while !left.is_empty() && Instant::now() < deadline {
        app.restart();
        let gone = campaigns::eventually(
            30,
            || app.get("/events?limit=100", &p.secret).json(),
            |v: &Value| {
                v["events"]
                    .as_array()
                    .is_some_and(|es| es.iter().all(|e| e["email"] != VICTIM))
            },
        );
        assert!(
            gone["events"].as_array().is_some(),
            "the events list answers: {gone}"
        );
        app.kill9();
        left = store_copies_of(&app.data_dir, VICTIM);
    }
    assert_eq!(
        left,
        Vec::<String>::new(),
        "the erasure resumed and finished"
    );
    app.restart();
    assert_eq!(
        app.get(&format!("/contacts/{contact}"), &p.secret).status,
        404
    );
}

#[test]
fn an_email_waiting_in_the_outbox_is_cancelled_by_the_delete_and_never_sent() {
    // A retry a minute away, on the moved clock: the email waits in the outbox.
    let (_dns, smtp, app, p) = rig(|s| s.sending.retry_base_ms = 60000);
    smtp.refuse(
        mailroom_testkit::Stage::RcptTo,
        &format!("451 4.2.1 mailbox of <{VICTIM}> busy, try later"),
    );
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": VICTIM, "from": FROM, "subject": "Later", "body": "<p>Later</p>"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let email = r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let contact = r.json()["data"]["emails"][0]["contact"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/emails/{email}");
    // Its attempt is recorded a moment before the dispatcher lets it go (SENDING till
    // then): wait for both.
    let retried = campaigns::eventually(
        30,
        || data(&app.get(&path, &p.secret), 200),
        |e: &Value| e["attempts"] == 1 && e["status"] == "QUEUED",
    );
    assert_eq!(
        (retried["status"].as_str(), retried["attempts"].as_u64()),
        (Some("QUEUED"), Some(1)),
        "{retried}"
    );

    let r = app.delete(&format!("/contacts/{contact}"), &p.secret);
    assert_eq!(r.status, 204, "{}", r.text);
    let erased = data(&app.get(&path, &p.secret), 200);
    assert_eq!(
        (
            erased["status"].as_str(),
            erased["to"].as_str(),
            erased["subject"].as_str()
        ),
        (Some("FAILED"), Some("erased@invalid"), Some("")),
        "{erased}"
    );
    assert!(
        !erased.to_string().contains(VICTIM),
        "nothing of the email names the address: {erased}"
    );

    advance(&app, 10 * 60_000);
    control(&app, &p, &smtp, KEEP);
    assert_eq!(mails_to(&smtp, VICTIM), 0, "the cancelled email never went");
}

#[test]
fn deleting_a_contact_erases_its_address_from_the_rejected_rows_of_its_imports() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    const ADDRESS: &str = "zelda.import.q7x@example.com";
    let r = app.post("/contacts", &p.secret, json!({"email": ADDRESS}));
    assert_eq!(r.status, 201, "{}", r.text);
    let contact = id(&r.json());
    // The row is refused for its number, and the import keeps its email cell (in the
    // case the file had) and the reason.
    let job = crate::support::imports::import(
        &app,
        &p.secret,
        "email,age:number\nZelda.Import.Q7X@example.com,old\nkeep.q7x@example.com,3\n",
    );
    let before = crate::support::imports::finished(&app, &p.secret, &job);
    assert!(
        before.to_string().to_lowercase().contains(ADDRESS),
        "the rejected row names the address: {before}"
    );

    let r = app.delete(&format!("/contacts/{contact}"), &p.secret);
    assert!([202, 204].contains(&r.status), "{}", r.text);
    let after = campaigns::eventually(
        30,
        || crate::support::imports::status(&app, &p.secret, &job),
        |v| !v.to_string().to_lowercase().contains(ADDRESS),
    );
    assert!(
        !after.to_string().to_lowercase().contains(ADDRESS),
        "the import still names the erased address: {after}"
    );
    let rejected = after["rejected"].as_array().expect("rejected rows");
    assert_eq!(rejected.len(), 1, "the row is still counted: {after}");
    assert_eq!(rejected[0]["line"], 2, "{after}");
}

#[test]
fn a_campaign_email_waiting_when_its_contact_is_deleted_counts_as_cancelled_and_the_campaign_ends()
{
    // The only recipient's relay asks to come back in a minute, on the moved clock: the
    // campaign's one email waits in the outbox, its campaign SENDING.
    let (_dns, smtp, app, p) = rig(|s| s.sending.retry_base_ms = 60000);
    smtp.refuse(
        mailroom_testkit::Stage::RcptTo,
        &format!("451 4.2.1 mailbox of <{VICTIM}> busy, try later"),
    );
    let r = app.post("/contacts", &p.secret, json!({"email": VICTIM}));
    assert!(r.status == 200 || r.status == 201, "{}", r.text);
    let contact = campaigns::contact_of(&app, &p, VICTIM)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cid = id(&campaigns::create(&app, &p, json!({})));
    let r = campaigns::send(&app, &p, &cid, json!({}));
    assert_eq!(r.status, 200, "{}", r.text);
    // Refused once: the email is back in the outbox, a minute away.
    campaigns::eventually(30, || smtp.refused(), |n: &u64| *n >= 1);
    let waiting = campaigns::stats_when(&app, &p, &cid, |s| count(s, "queued") == 1);
    assert_eq!(
        (
            count(&waiting, "totalRecipients"),
            count(&waiting, "cancelled")
        ),
        (1, 0),
        "{waiting}"
    );

    let r = app.delete(&format!("/contacts/{contact}"), &p.secret);
    assert_eq!(r.status, 204, "{}", r.text);
    let ended = campaigns::campaign_when(&app, &p, &cid, "SENT");
    let stats = campaigns::stats(&app, &p, &cid);
    assert_eq!(
        (count(&stats, "queued"), count(&stats, "cancelled")),
        (0, 1),
        "the erased contact's email counts as cancelled: {stats} ({ended})"
    );

    advance(&app, 10 * 60_000);
    control(&app, &p, &smtp, KEEP);
    assert_eq!(mails_to(&smtp, VICTIM), 0, "the cancelled email never went");
}
