//! Retention (`retention.*`): moving the clock past a kind's retention makes the
//! background purge remove those records within seconds, while the aggregates that
//! counted them (campaign stats, `/events/names`) stay as they were.

use serde_json::{json, Value};

use crate::support::app::{Project, TestApp};
use crate::support::campaign::{
    advance, contact_of, contacts, count, create, data, emails, eventually, id, rig,
    send_and_settle, stats, visit,
};
use crate::support::store::store_copies_of;

const DAY_MS: i64 = 24 * 3_600_000;

fn track(app: &TestApp, p: &Project, email: &str, event: &str) -> Value {
    let r = app.post(
        "/v1/track",
        &p.secret,
        json!({"email": email, "event": event}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["data"].clone()
}

fn events(app: &TestApp, p: &Project, query: &str) -> Value {
    let r = app.get(&format!("/events?limit=100&{query}"), &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn names_of(list: &Value) -> Vec<String> {
    list["events"]
        .as_array()
        .expect("an events array")
        .iter()
        .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn name_count(app: &TestApp, p: &Project, name: &str) -> Value {
    let names = app.get("/events/names", &p.secret).json();
    names["names"]
        .as_array()
        .expect("a names array")
        .iter()
        .find(|n| n["name"] == name)
        .map(|n| n["count"].clone())
        .unwrap_or(Value::Null)
}

/// The value of `mailroom_retention_removed_total{kind="<kind>"}`.
fn removed_metric(app: &TestApp, kind: &str) -> u64 {
    let text = app.request("GET", "/metrics", None, None).text;
    let series = format!("mailroom_retention_removed_total{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} in /metrics:\n{text}"))
}

/// Waits until the purge has counted at least `n` removals of `kind`: a record
/// reads as gone once its removal is staged, and the count follows the batch.
fn assert_removed_at_least(app: &TestApp, kind: &str, n: u64) {
    let removed = eventually(30, || removed_metric(app, kind), |got| *got >= n);
    assert!(
        removed >= n,
        "{kind}: {removed} removed, wanted at least {n}"
    );
}

#[test]
fn events_past_their_retention_leave_every_listing_while_event_names_keep_their_counts() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let old = track(&app, &p, "old@example.com", "signup");
    track(&app, &p, "old@example.com", "purchase");
    let old_contact = old["contact"].as_str().unwrap().to_owned();
    let old_event = id(&events(&app, &p, "name=signup")["events"][0]);

    advance(&app, 366 * DAY_MS);
    track(&app, &p, "new@example.com", "signup");
    let gone = |l: &Value| !names_of(l).contains(&"purchase".to_owned());
    let all = eventually(30, || events(&app, &p, ""), gone);
    assert!(gone(&all), "the old events went: {all}");
    assert!(
        names_of(&all).contains(&"signup".to_owned()),
        "the new one stays: {all}"
    );
    assert_eq!(
        all["total"],
        names_of(&all).len(),
        "the total counts what is left: {all}"
    );

    let signups = events(&app, &p, "name=signup");
    assert_eq!(
        (signups["total"].clone(), names_of(&signups).len()),
        (json!(1), 1),
        "{signups}"
    );
    let of_old = events(&app, &p, &format!("contactId={old_contact}"));
    assert_eq!(
        (of_old["total"].clone(), names_of(&of_old).len()),
        (json!(0), 0),
        "{of_old}"
    );
    let both = events(&app, &p, &format!("contactId={old_contact}&name=signup"));
    assert_eq!(both["total"], 0, "{both}");
    let r = app.get(&format!("/events/{old_event}"), &p.secret);
    assert_eq!(r.status, 404, "{}", r.text);

    assert_eq!(
        name_count(&app, &p, "signup"),
        2,
        "/events/names still counts both"
    );
    assert_eq!(name_count(&app, &p, "purchase"), 1);
    assert_removed_at_least(&app, "events", 2);

    // A later purge goes on past what the first one left.
    advance(&app, 366 * DAY_MS);
    // The total and the listing settle together: wait for both, then check both.
    let empty = eventually(
        30,
        || events(&app, &p, "name=signup"),
        |l| l["total"] == 0 && names_of(l).is_empty(),
    );
    assert_eq!(empty["total"], 0, "{empty}");
    assert_eq!(names_of(&empty).len(), 0, "{empty}");
    assert_eq!(name_count(&app, &p, "signup"), 2);
}

#[test]
fn an_email_loses_its_content_after_its_content_retention_and_its_record_later_while_campaign_stats_stay(
) {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("r", 3), true);
    let cid = id(&create(&app, &p, json!({})));
    let (got, before) = send_and_settle(&app, &p, &smtp, &cid, 3);
    let email = crate::support::campaign::email_id_of(&String::from_utf8_lossy(&got[0].data));
    let read = || app.get(&format!("/emails/{email}"), &p.secret);
    let fresh = data(&read(), 200);
    assert_eq!(fresh["contentRemoved"], false, "{fresh}");

    advance(&app, 31 * DAY_MS);
    let stripped = eventually(30, || data(&read(), 200), |e| e["contentRemoved"] == true);
    assert_eq!(
        stripped["contentRemoved"], true,
        "the content went first: {stripped}"
    );
    assert_eq!(stripped["status"], "SENT", "the record stays: {stripped}");
    assert_eq!(stripped["subject"], fresh["subject"]);

    advance(&app, 150 * DAY_MS);
    let status = eventually(30, || read().status, |s| *s == 404);
    assert_eq!(status, 404, "the record went after emails_days");
    let stats = data(&app.get(&format!("/campaigns/{cid}/stats"), &p.secret), 200);
    assert_eq!(
        count(&stats, "delivered"),
        count(&before, "delivered"),
        "{stats}"
    );
    assert_eq!(count(&stats, "delivered"), 3);
    assert_removed_at_least(&app, "emails", 3);
    assert_removed_at_least(&app, "email_contents", 3);
    assert_removed_at_least(&app, "campaign_audience_chunks", 1);
}

/// Sends an email with its own text part and waits until it is SENT; answers its id.
fn sent_with_text(app: &TestApp, p: &Project, text: &str) -> String {
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "own-text@example.com", "from": "hello@acme.test", "subject": "Own text",
               "body": "<p>Hello</p>", "text": text}),
    );
    let email = data(&r, 200)["emails"][0]["email"]
        .as_str()
        .expect("an email id")
        .to_owned();
    let read = || data(&app.get(&format!("/emails/{email}"), &p.secret), 200);
    let sent = eventually(30, read, |e| e["status"] == "SENT");
    assert_eq!(sent["status"], "SENT", "{sent}");
    email
}

#[test]
fn an_emails_own_text_part_goes_with_its_content_after_the_content_retention() {
    let (_dns, _smtp, mut app, p) = rig(|_| {});
    let old = sent_with_text(&app, &p, "Old text r9k2");
    advance(&app, 31 * DAY_MS);
    let read = || data(&app.get(&format!("/emails/{old}"), &p.secret), 200);
    let stripped = eventually(30, read, |e| e["contentRemoved"] == true);
    assert_eq!(stripped["contentRemoved"], true, "{stripped}");
    sent_with_text(&app, &p, "New text r9k2");

    app.kill9();
    assert_eq!(
        store_copies_of(&app.data_dir, "Old text r9k2"),
        Vec::<String>::new()
    );
    assert!(
        !store_copies_of(&app.data_dir, "New text r9k2").is_empty(),
        "a fresh email keeps its text part"
    );
}

#[test]
fn ended_workflow_executions_past_their_retention_leave_the_listing_and_their_lookup() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "Bye", "enabled": true, "triggerEvent": "signup", "allowReentry": true,
               "steps": [{"id": "end", "type": "EXIT", "config": {}, "next": null}]}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let wid = id(&r.json());
    track(&app, &p, "ada@example.com", "signup");
    let list = |app: &TestApp| {
        let r = app.get(&format!("/workflows/{wid}/executions"), &p.secret);
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    };
    let ended = eventually(
        30,
        || list(&app),
        |l| l["executions"][0]["status"] == "EXITED",
    );
    let xid = id(&ended["executions"][0]);

    advance(&app, 91 * DAY_MS);
    let after = eventually(30, || list(&app), |l| l["total"] == 0);
    assert_eq!(after["total"], 0, "{after}");
    assert_eq!(
        after["executions"].as_array().map(Vec::len),
        Some(0),
        "{after}"
    );
    let r = app.get(&format!("/workflows/{wid}/executions/{xid}"), &p.secret);
    assert_eq!(r.status, 404, "{}", r.text);
    assert_removed_at_least(&app, "executions", 1);
}

#[test]
fn an_idempotency_key_past_its_retention_is_removed_and_takes_another_body() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let key = [("Idempotency-Key", "order-42")];
    let track_as = |email: &str| {
        let body = json!({"email": email, "event": "order"}).to_string();
        app.request_with("POST", "/v1/track", Some(&p.secret), Some(&body), &key)
    };
    assert_eq!(track_as("a@example.com").status, 200);
    assert_eq!(
        track_as("b@example.com").status,
        409,
        "within its retention it conflicts"
    );

    advance(&app, 25 * 3_600_000);
    let removed = eventually(30, || removed_metric(&app, "idempotency_keys"), |n| *n >= 1);
    assert!(removed >= 1, "the expired key was removed");
    assert_eq!(
        track_as("b@example.com").status,
        200,
        "the key is free again"
    );
}

#[test]
fn a_finished_import_record_goes_after_the_emails_retention_and_its_contacts_stay() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let old = crate::support::imports::import(&app, &p.secret, "email\nold@example.com\n");
    crate::support::imports::finished(&app, &p.secret, &old);
    advance(&app, 181 * DAY_MS);
    // The control: an import that finished after the move stays.
    let new = crate::support::imports::import(&app, &p.secret, "email\nnew@example.com\n");
    crate::support::imports::finished(&app, &p.secret, &new);
    let path = |id: &str| format!("/contacts/imports/{id}");
    let r = eventually(30, || app.get(&path(&old), &p.secret), |r| r.status == 404);
    assert_eq!(r.status, 404, "the old import's record went: {}", r.text);
    assert_eq!(app.get(&path(&new), &p.secret).status, 200);
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 2);
    assert_removed_at_least(&app, "contact_imports", 1);
}

#[test]
fn a_campaigns_unsubscribe_markers_go_after_the_emails_retention_and_its_count_stays_as_it_was() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let (paths, cid) =
        crate::links::unsubscribe_paths(&app, &p, &smtp, &["ada@example.com"], json!({}));
    let one_click = Some("List-Unsubscribe=One-Click");
    let r = visit(&app, "POST", &paths[0], one_click);
    assert_eq!(r.status, 200, "{}", r.text);
    let unsubscribed = |s: &Value| count(s, "unsubscribed");
    let s = eventually(30, || stats(&app, &p, &cid), |s| unsubscribed(s) == 1);
    assert_eq!(unsubscribed(&s), 1, "{s}");

    advance(&app, 181 * DAY_MS);
    let removed = eventually(
        30,
        || removed_metric(&app, "campaign_unsubscribes"),
        |n| *n >= 1,
    );
    assert!(removed >= 1, "the campaign's unsubscribe marker went");
    assert_eq!(unsubscribed(&stats(&app, &p, &cid)), 1, "the count stays");

    // The old link still works both ways, but the campaign's count is closed: it is
    // neither taken back nor counted a second time.
    let back = visit(&app, "POST", &format!("{}/resubscribe", paths[0]), Some(""));
    assert_eq!(back.status, 200, "{}", back.text);
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], true);
    assert_eq!(unsubscribed(&stats(&app, &p, &cid)), 1);
    let again = visit(&app, "POST", &paths[0], one_click);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);
    assert_eq!(unsubscribed(&stats(&app, &p, &cid)), 1);
}

#[test]
fn a_reentry_window_record_goes_once_its_day_is_over_and_the_contact_enters_again() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "Again", "enabled": true, "triggerEvent": "signup", "allowReentry": true,
               "steps": [{"id": "end", "type": "EXIT", "config": {}, "next": null}]}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let wid = id(&r.json());
    let list = || {
        let r = app.get(&format!("/workflows/{wid}/executions"), &p.secret);
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    };
    let executions = || list()["total"].as_u64().unwrap_or_default();
    track(&app, &p, "ada@example.com", "signup");
    // A contact re-enters only once its last execution ended.
    let ended = eventually(30, list, |l| l["executions"][0]["status"] == "EXITED");
    assert_eq!(ended["total"], 1, "{ended}");
    let before = removed_metric(&app, "workflow_entry_windows");

    advance(&app, DAY_MS + 1);
    let removed = eventually(
        30,
        || removed_metric(&app, "workflow_entry_windows"),
        |n| *n > before,
    );
    assert_eq!(removed, before + 1, "the day-old window record went");
    track(&app, &p, "ada@example.com", "signup");
    assert_eq!(eventually(30, executions, |n| *n == 2), 2);
}
