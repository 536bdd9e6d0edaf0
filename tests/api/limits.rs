//! Bounded tenants: every per-project resource has a limit, and reaching it gives a clear
//! error; the public key has a rate budget and Idempotency-Keys of its own.

use serde_json::json;

use crate::support::app::TestApp;

#[test]
fn a_contacts_data_is_bounded_after_every_call_merged_into_it() {
    let app = TestApp::spawn_with(|s| s.limits.max_data_bytes = 300);
    let p = app.create_project("Acme");
    let half = "x".repeat(120);
    app.upsert(
        &p.secret,
        json!({"email": "a@example.com", "data": {"a": half}}),
    );
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "a@example.com", "data": {"b": half, "c": half}}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.field_codes(), [("data".to_owned(), "too_big".to_owned())]);
    assert!(r.json()["error"]["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("at most 300"));
    let r = app.post(
        "/v1/track",
        &p.public,
        json!({"email": "a@example.com", "event": "e", "data": {"b": half, "c": half}}),
    );
    assert_eq!(
        r.status, 422,
        "track merges into the same bound: {}",
        r.text
    );
    let id = app.get("/contacts", &p.secret).json()["contacts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app.patch(
        &format!("/contacts/{id}"),
        &p.secret,
        json!({"data": {"b": half, "c": half}}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = app.patch(
        &format!("/contacts/{id}"),
        &p.secret,
        json!({"data": {"a": null, "b": half}}),
    );
    assert_eq!(r.status, 200, "removing a key makes room: {}", r.text);
}

#[test]
fn a_project_at_its_contact_limit_refuses_new_contacts_and_keeps_updating_old_ones() {
    let app = TestApp::spawn_with(|s| s.limits.max_contacts = 2);
    let p = app.create_project("Acme");
    app.upsert(&p.secret, json!({"email": "a@example.com"}));
    app.upsert(&p.secret, json!({"email": "b@example.com"}));
    let r = app.post("/contacts", &p.secret, json!({"email": "c@example.com"}));
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "CONFLICT"),
        "{}",
        r.text
    );
    assert!(r.text.contains("max_contacts"), "{}", r.text);
    let r = app.post(
        "/v1/track",
        &p.public,
        json!({"email": "d@example.com", "event": "e"}),
    );
    assert_eq!(r.status, 409, "{}", r.text);
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "a@example.com", "data": {"k": 1}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let other = app.create_project("Other");
    let r = app.post(
        "/contacts",
        &other.secret,
        json!({"email": "c@example.com"}),
    );
    assert_eq!(
        r.status, 201,
        "another project has its own count: {}",
        r.text
    );
}

#[test]
fn domains_segments_tracked_segments_and_templates_have_limits() {
    let app = TestApp::spawn_with(|s| {
        s.limits.max_domains = 1;
        s.limits.max_segments = 2;
        s.limits.max_tracked_segments = 1;
        s.limits.max_templates = 1;
    });
    let p = app.create_project("Acme");
    assert_eq!(
        app.post("/domains", &p.secret, json!({"domain": "one.example"}))
            .status,
        201
    );
    let r = app.post("/domains", &p.secret, json!({"domain": "two.example"}));
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "CONFLICT"),
        "{}",
        r.text
    );
    assert!(r.text.contains("max_domains"));

    let seg = |name: &str, track: bool| {
        app.post(
            "/segments",
            &p.secret,
            json!({"name": name, "trackMembership": track,
            "filters": {"operator": "AND", "conditions": []}}),
        )
    };
    assert_eq!(seg("tracked", true).status, 201);
    let r = seg("also tracked", true);
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("max_tracked_segments"), "{}", r.text);
    let quiet = seg("quiet", false);
    assert_eq!(quiet.status, 201);
    let id = quiet.json()["id"].as_str().unwrap().to_owned();
    let r = app.patch(
        &format!("/segments/{id}"),
        &p.secret,
        json!({"trackMembership": true}),
    );
    assert_eq!(r.status, 409, "turning tracking on counts too: {}", r.text);
    let r = seg("third", false);
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("max_segments"), "{}", r.text);

    let t = |name: &str| {
        app.post(
            "/templates",
            &p.secret,
            json!({"name": name, "subject": "s", "body": "b"}),
        )
    };
    assert_eq!(t("one").status, 201);
    let r = t("two");
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("max_templates"), "{}", r.text);
}

#[test]
fn the_public_key_spends_a_budget_of_its_own() {
    let app = TestApp::spawn_with(|s| {
        s.limits.requests_per_minute = 5;
        s.limits.public_requests_per_minute = 3;
    });
    let p = app.create_project("Acme");
    let track = || {
        app.post(
            "/v1/track",
            &p.public,
            json!({"email": "a@example.com", "event": "visit"}),
        )
    };
    for _ in 0..3 {
        assert_eq!(track().status, 200);
    }
    let r = track();
    assert_eq!(r.status, 429, "{}", r.text);
    let r = app.get("/contacts", &p.secret);
    assert_eq!(
        r.status, 200,
        "the secret key's budget is untouched: {}",
        r.text
    );
    assert_eq!(r.header("ratelimit-limit"), Some("5"));
}

#[test]
fn public_and_secret_keys_keep_apart_idempotency_keys() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let with_key = |key: &str, event: &str| {
        let body = json!({"email": "a@example.com", "event": event}).to_string();
        app.request_with(
            "POST",
            "/v1/track",
            Some(key),
            Some(&body),
            &[("Idempotency-Key", "k-1")],
        )
    };
    let first = with_key(&p.public, "from-the-page");
    assert_eq!(first.status, 200, "{}", first.text);
    let r = with_key(&p.secret, "from-the-server");
    assert_eq!(
        r.status, 200,
        "not a conflict with the public key's use: {}",
        r.text
    );
    assert!(r.json()["data"]["event"].as_str().is_some());
    let events = app.get("/events", &p.secret).json();
    assert_eq!(events["total"], 2, "both were recorded: {events}");
    let replay = with_key(&p.public, "from-the-page");
    assert_eq!(replay.status, 200);
    assert_eq!(
        app.get("/events", &p.secret).json()["total"],
        2,
        "a replay writes nothing"
    );
}

#[test]
fn all_of_a_projects_contact_data_together_is_bounded() {
    let app = TestApp::spawn_with(|s| s.limits.max_project_data_bytes = 500);
    let p = app.create_project("Acme");
    let chunk = "x".repeat(280);
    let a = app.upsert(
        &p.secret,
        json!({"email": "a@example.com", "data": {"k": chunk}}),
    );
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "b@example.com", "data": {"k": chunk}}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "CONFLICT"),
        "{}",
        r.text
    );
    assert!(r.text.contains("max_project_data_bytes"), "{}", r.text);
    let r = app.post("/contacts", &p.secret, json!({"email": "b@example.com"}));
    assert_eq!(
        r.status, 201,
        "a contact without data still fits: {}",
        r.text
    );
    let id = a["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/contacts/{id}"), &p.secret).status,
        204
    );
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "b@example.com", "data": {"k": chunk}}),
    );
    assert_eq!(
        r.status, 200,
        "deleting a contact gave its bytes back: {}",
        r.text
    );
}
