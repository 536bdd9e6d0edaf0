//! POST /v1/track: contact upsert plus an event, with a public or a secret key.

use serde_json::{json, Value};

use crate::support::app::{Resp, TestApp};

fn track(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post("/v1/track", key, body);
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["success"], true);
    v["data"].clone()
}

fn with_key(app: &TestApp, key: &str, idem: &str, body: &Value) -> Resp {
    app.request_with(
        "POST",
        "/v1/track",
        Some(key),
        Some(&body.to_string()),
        &[("Idempotency-Key", idem)],
    )
}

#[test]
fn track_with_a_public_key_creates_the_contact_and_records_the_event() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let data = track(
        &app,
        &p.public,
        json!({"email": "Ada@Example.com", "event": "signup"}),
    );
    assert!(data["timestamp"].as_str().unwrap().ends_with('Z'));
    let contact = app.get(
        &format!("/contacts/{}", data["contact"].as_str().unwrap()),
        &p.secret,
    );
    assert_eq!(contact.status, 200);
    assert_eq!(contact.json()["email"], "ada@example.com");
    assert_eq!(
        contact.json()["subscribed"],
        true,
        "a new contact is subscribed by default"
    );
    let event = app
        .get(
            &format!("/events/{}", data["event"].as_str().unwrap()),
            &p.secret,
        )
        .json();
    assert_eq!(event["name"], "signup");
    assert_eq!(event["source"], "API");
    assert_eq!(event["contactId"], data["contact"]);
    assert_eq!(event["email"], "ada@example.com");
    assert_eq!(event["createdAt"], data["timestamp"]);
}

#[test]
fn track_with_a_secret_key_updates_the_existing_contact_and_its_subscription() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(&p.secret, json!({"email": "bo@example.com"}));
    let data = track(
        &app,
        &p.secret,
        json!({"email": "bo@example.com", "event": "cancel", "subscribed": false}),
    );
    assert_eq!(data["contact"], c["id"], "the same contact, not a new one");
    let now = app.get(
        &format!("/contacts/{}", c["id"].as_str().unwrap()),
        &p.secret,
    );
    assert_eq!(now.json()["subscribed"], false);
    let names = app.get("/events/names", &p.secret).json();
    let listed: Vec<&str> = names["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&"contact.unsubscribed"), "{listed:?}");
    assert!(listed.contains(&"cancel"), "{listed:?}");
}

#[test]
fn plain_and_persistent_values_go_to_the_contact_and_the_rest_only_to_the_event() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(
        &p.secret,
        json!({"email": "cy@example.com", "data": {"old": 1, "drop": true}}),
    );
    // The secret key: a public key's null deletes nothing (see below).
    let data = track(
        &app,
        &p.secret,
        json!({"email": "cy@example.com", "event": "checkout", "data": {
            "plan": "pro",
            "tier": {"value": "gold", "persistent": true},
            "cartTotal": {"value": 42.5, "persistent": false},
            "drop": null
        }}),
    );
    let contact = app
        .get(
            &format!("/contacts/{}", data["contact"].as_str().unwrap()),
            &p.secret,
        )
        .json();
    assert_eq!(
        contact["data"],
        json!({"old": 1, "plan": "pro", "tier": "gold"}),
        "persistent values are stored plainly, null removes, persistent:false stays off"
    );
    let event = app
        .get(
            &format!("/events/{}", data["event"].as_str().unwrap()),
            &p.secret,
        )
        .json();
    assert_eq!(
        event["data"],
        json!({"plan": "pro", "tier": "gold", "cartTotal": 42.5, "drop": null})
    );
}

#[test]
fn reserved_event_names_are_refused_with_reserved_event() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for name in [
        "email.sent",
        "email.open",
        "contact.subscribed",
        "contact.unsubscribed",
        "segment.pro-users.entry",
        "segment.pro-users.exit",
    ] {
        let r = app.post(
            "/v1/track",
            &p.public,
            json!({"email": "a@example.com", "event": name}),
        );
        assert_eq!(r.status, 422, "{name}: {}", r.text);
        assert_eq!(
            r.field_codes(),
            [("event".to_owned(), "reserved_event".to_owned())],
            "{name}"
        );
    }
    assert_eq!(
        app.get("/contacts", &p.secret).json()["total"],
        0,
        "a refused call writes nothing"
    );
}

#[test]
fn the_same_idempotency_key_and_body_replays_the_first_answer_and_records_nothing_more() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let body = json!({"email": "d@example.com", "event": "purchase", "data": {"n": 1}});
    let first = with_key(&app, &p.public, "order-1", &body);
    assert_eq!(first.status, 200, "{}", first.text);
    // The same JSON with other whitespace and key order is the same body.
    let same = app.request_with(
        "POST",
        "/v1/track",
        Some(&p.public),
        Some(r#"{ "data": {"n": 1}, "event": "purchase", "email": "d@example.com" }"#),
        &[("Idempotency-Key", "order-1")],
    );
    assert_eq!(same.status, 200, "{}", same.text);
    assert_eq!(same.json()["data"], first.json()["data"]);
    let events = app.get("/events?name=purchase", &p.secret).json();
    assert_eq!(events["total"], 1, "the replay recorded no second event");

    let other = with_key(
        &app,
        &p.public,
        "order-1",
        &json!({"email": "d@example.com", "event": "purchase", "data": {"n": 2}}),
    );
    assert_eq!((other.status, other.code().as_str()), (409, "CONFLICT"));
    let fresh = with_key(&app, &p.public, "order-2", &body);
    assert_eq!(fresh.status, 200);
    assert_ne!(fresh.json()["data"]["event"], first.json()["data"]["event"]);
    assert_eq!(
        app.get("/events?name=purchase", &p.secret).json()["total"],
        2
    );
}

#[test]
fn idempotency_keys_are_per_project() {
    let app = TestApp::spawn();
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let body = json!({"email": "e@example.com", "event": "x"});
    assert_eq!(with_key(&app, &a.public, "k", &body).status, 200);
    let other = with_key(
        &app,
        &b.public,
        "k",
        &json!({"email": "f@example.com", "event": "x"}),
    );
    assert_eq!(other.status, 200, "another project's key does not conflict");
}

#[test]
fn a_bad_idempotency_key_is_a_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let body = json!({"email": "e@example.com", "event": "x"});
    let long = "k".repeat(256);
    for key in [long.as_str(), "has space"] {
        let r = with_key(&app, &p.public, key, &body);
        assert_eq!(r.status, 422, "{key}");
        assert_eq!(r.json()["error"]["errors"][0]["field"], "Idempotency-Key");
    }
}

#[test]
fn missing_fields_wrong_types_and_oversized_values_are_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post("/v1/track", &p.public, json!({}));
    assert_eq!(r.status, 422);
    assert_eq!(
        r.field_codes(),
        [
            ("email".to_owned(), "invalid_type".to_owned()),
            ("event".to_owned(), "invalid_type".to_owned())
        ]
    );
    let r = app.post(
        "/v1/track",
        &p.public,
        json!({"email": "a@example.com", "event": 5, "data": [1], "subscribed": "yes"}),
    );
    assert_eq!(
        r.field_codes(),
        [
            ("event".to_owned(), "invalid_type".to_owned()),
            ("subscribed".to_owned(), "invalid_type".to_owned()),
            ("data".to_owned(), "invalid_type".to_owned())
        ]
    );
    let r = app.post(
        "/v1/track",
        &p.public,
        json!({"email": "a@example.com", "event": "x".repeat(201)}),
    );
    assert_eq!(
        r.field_codes(),
        [("event".to_owned(), "too_big".to_owned())]
    );
    let r = app.post(
        "/v1/track",
        &p.public,
        json!({"email": "a@example.com", "event": "x", "data": {"blob": "b".repeat(70_000)}}),
    );
    assert_eq!(r.field_codes(), [("data".to_owned(), "too_big".to_owned())]);
    let r = app.post(
        "/v1/track",
        &p.public,
        json!({"email": "not-an-email", "event": "x"}),
    );
    assert_eq!(
        r.field_codes(),
        [("email".to_owned(), "invalid_string".to_owned())]
    );
}

#[test]
fn a_malformed_body_is_400_and_a_wrong_key_is_401() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.request("POST", "/v1/track", Some(&p.public), Some("{\"email\":"));
    assert_eq!((r.status, r.code().as_str()), (400, "BAD_REQUEST"));
    let wrong = format!("pk_{}", "x".repeat(40));
    let r = app.post(
        "/v1/track",
        &wrong,
        json!({"email": "a@example.com", "event": "x"}),
    );
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_API_KEY"));
    let r = app.request("POST", "/v1/track", None, Some("{}"));
    assert_eq!((r.status, r.code().as_str()), (401, "MISSING_AUTH"));
}

#[test]
fn a_tracked_contact_belongs_only_to_the_keys_project() {
    let app = TestApp::spawn();
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let data = track(
        &app,
        &a.public,
        json!({"email": "g@example.com", "event": "x"}),
    );
    let id = data["contact"].as_str().unwrap();
    let r = app.get(&format!("/contacts/{id}"), &b.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "CONTACT_NOT_FOUND"));
    let r = app.get(
        &format!("/events/{}", data["event"].as_str().unwrap()),
        &b.secret,
    );
    assert_eq!((r.status, r.code().as_str()), (404, "RESOURCE_NOT_FOUND"));
}

/// The contact record for `email`, read with the secret key.
fn contact_by_email(app: &TestApp, key: &str, email: &str) -> Value {
    let r = app.get(&format!("/contacts?search={email}"), key);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["contacts"][0].clone()
}

#[test]
fn track_with_a_public_key_keeps_an_unsubscribed_contact_unsubscribed() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(
        &p.secret,
        json!({"email": "left@example.com", "subscribed": false}),
    );
    // Whoever copied the public key from a web page tries to resubscribe them.
    track(
        &app,
        &p.public,
        json!({"email": "left@example.com", "event": "visit", "subscribed": true}),
    );
    let c = contact_by_email(&app, &p.secret, "left@example.com");
    assert_eq!(c["subscribed"], false, "{c}");
    // And the other way round: it cannot unsubscribe someone either.
    app.upsert(&p.secret, json!({"email": "stays@example.com"}));
    track(
        &app,
        &p.public,
        json!({"email": "stays@example.com", "event": "visit", "subscribed": false}),
    );
    let c = contact_by_email(&app, &p.secret, "stays@example.com");
    assert_eq!(c["subscribed"], true, "{c}");
    let names = app.get("/events/names", &p.secret).json().to_string();
    assert!(!names.contains("contact.subscribed"), "{names}");
    assert!(!names.contains("contact.unsubscribed"), "{names}");
}

#[test]
fn track_with_a_public_key_sets_subscribed_on_a_contact_it_creates() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    track(
        &app,
        &p.public,
        json!({"email": "new@example.com", "event": "signup", "subscribed": false}),
    );
    let c = contact_by_email(&app, &p.secret, "new@example.com");
    assert_eq!(c["subscribed"], false, "{c}");
}

#[test]
fn track_with_a_public_key_adds_data_but_a_null_deletes_nothing() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "data": {"plan": "pro", "name": "Ada"}}),
    );
    track(
        &app,
        &p.public,
        json!({"email": "ada@example.com", "event": "visit",
               "data": {"plan": null, "name": null, "page": "/pricing"}}),
    );
    let c = contact_by_email(&app, &p.secret, "ada@example.com");
    assert_eq!(
        c["data"],
        json!({"plan": "pro", "name": "Ada", "page": "/pricing"}),
        "{c}"
    );
    // The secret key may delete keys and resubscribe, as before.
    app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "subscribed": false}),
    );
    track(
        &app,
        &p.secret,
        json!({"email": "ada@example.com", "event": "visit", "subscribed": true,
               "data": {"plan": null}}),
    );
    let c = contact_by_email(&app, &p.secret, "ada@example.com");
    assert_eq!(c["subscribed"], true, "{c}");
    assert_eq!(c["data"], json!({"name": "Ada", "page": "/pricing"}), "{c}");
}
