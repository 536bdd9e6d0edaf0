//! Contacts: upsert semantics, reads, updates, deletes and paging.

use std::collections::HashSet;

use serde_json::json;

use crate::support::app::TestApp;

#[test]
fn upsert_creates_a_contact_with_201_then_updates_it_with_200() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "  Ada@Example.COM ", "data": {"plan": "free"}}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let created = r.json();
    assert_eq!(created["email"], "ada@example.com");
    assert_eq!(
        created["subscribed"], true,
        "a new contact is subscribed by default"
    );
    assert_eq!(created["_meta"], json!({"isNew": true, "isUpdate": false}));
    assert!(created["createdAt"].as_str().unwrap().ends_with('Z'));

    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "ADA@example.com", "data": {"name": "Ada"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let updated = r.json();
    assert_eq!(
        updated["id"], created["id"],
        "the email is the upsert key, case-insensitively"
    );
    assert_eq!(updated["_meta"], json!({"isNew": false, "isUpdate": true}));
    assert_eq!(
        updated["data"],
        json!({"plan": "free", "name": "Ada"}),
        "data merges shallowly"
    );
    assert_eq!(
        updated["subscribed"], true,
        "an omitted flag stays as it was"
    );
}

#[test]
fn a_null_data_value_removes_the_key_and_nested_objects_are_replaced() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(
        &p.secret,
        json!({"email": "a@example.com", "data": {"plan": "pro", "prefs": {"a": 1}}}),
    );
    let c = app.upsert(
        &p.secret,
        json!({"email": "a@example.com", "data": {"plan": null, "prefs": {"b": 2}}}),
    );
    assert_eq!(c["data"], json!({"prefs": {"b": 2}}));
}

#[test]
fn subscribed_false_on_create_is_kept_and_can_be_changed_by_patch() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(
        &p.secret,
        json!({"email": "b@example.com", "subscribed": false}),
    );
    assert_eq!(c["subscribed"], false);
    let id = c["id"].as_str().unwrap();
    let r = app.patch(
        &format!("/contacts/{id}"),
        &p.secret,
        json!({"subscribed": true, "data": {"x": 1}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let patched = r.json();
    assert_eq!(patched["subscribed"], true);
    assert_eq!(patched["data"], json!({"x": 1}));
    assert!(
        patched.get("_meta").is_none(),
        "PATCH answers the record without _meta"
    );
    assert_eq!(
        app.get(&format!("/contacts/{id}"), &p.secret).json(),
        patched
    );
}

#[test]
fn patch_with_an_empty_object_changes_nothing_and_cannot_change_the_email() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(
        &p.secret,
        json!({"email": "c@example.com", "data": {"k": "v"}}),
    );
    let id = c["id"].as_str().unwrap();
    let r = app.patch(&format!("/contacts/{id}"), &p.secret, json!({}));
    assert_eq!(r.status, 200);
    let r = app.patch(
        &format!("/contacts/{id}"),
        &p.secret,
        json!({"email": "other@example.com"}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["email"], "c@example.com");
    assert_eq!(r.json()["data"], json!({"k": "v"}));
}

#[test]
fn delete_answers_204_and_then_the_contact_is_gone() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(&p.secret, json!({"email": "d@example.com"}));
    let path = format!("/contacts/{}", c["id"].as_str().unwrap());
    let r = app.delete(&path, &p.secret);
    assert_eq!(r.status, 204);
    assert!(r.text.is_empty());
    let r = app.get(&path, &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "CONTACT_NOT_FOUND"));
    assert_eq!(app.delete(&path, &p.secret).status, 404);
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 0);
    let again = app.post("/contacts", &p.secret, json!({"email": "d@example.com"}));
    assert_eq!(again.status, 201, "the email is free again after a delete");
}

#[test]
fn unknown_and_malformed_contact_ids_give_404() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for id in ["not-a-uuid", "01a20599-399a-725c-8571-30c7383e660f"] {
        let r = app.get(&format!("/contacts/{id}"), &p.secret);
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "CONTACT_NOT_FOUND"),
            "{id}"
        );
        let r = app.patch(&format!("/contacts/{id}"), &p.secret, json!({}));
        assert_eq!(r.status, 404, "{id}");
    }
}

#[test]
fn paging_through_45_contacts_by_20_has_no_gap_and_no_repeat() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let emails: Vec<String> = (0..45).map(|i| format!("user{i:02}@example.com")).collect();
    for e in &emails {
        app.upsert(&p.secret, json!({"email": e}));
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/contacts?limit=20&cursor={c}"),
            None => "/contacts?limit=20".into(),
        };
        let page = app.get(&path, &p.secret).json();
        pages += 1;
        assert_eq!(page["total"], 45);
        let items = page["contacts"].as_array().unwrap();
        seen.extend(
            items
                .iter()
                .map(|c| c["email"].as_str().unwrap().to_owned()),
        );
        assert_eq!(page["hasMore"], page["cursor"].is_string());
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = emails.iter().rev().cloned().collect();
    assert_eq!(seen, expected, "newest first, each exactly once");
}

#[test]
fn a_cursor_survives_inserts_and_deletes_between_pages() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let ids: Vec<String> = (0..10)
        .map(|i| {
            app.upsert(&p.secret, json!({"email": format!("u{i}@example.com")}))["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let first = app.get("/contacts?limit=4", &p.secret).json();
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    app.upsert(&p.secret, json!({"email": "late@example.com"}));
    assert_eq!(
        app.delete(&format!("/contacts/{}", ids[9 - 4]), &p.secret)
            .status,
        204
    );
    let second = app
        .get(&format!("/contacts?limit=100&cursor={cursor}"), &p.secret)
        .json();
    let got: Vec<&str> = second["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        got,
        [
            "u4@example.com",
            "u3@example.com",
            "u2@example.com",
            "u1@example.com",
            "u0@example.com"
        ]
    );
}

#[test]
fn limit_outside_one_to_a_hundred_gives_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for bad in ["0", "101", "-1", "abc"] {
        let r = app.get(&format!("/contacts?limit={bad}"), &p.secret);
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_ERROR"),
            "limit={bad}"
        );
        assert_eq!(r.json()["error"]["errors"][0]["field"], "limit");
    }
    assert_eq!(app.get("/contacts?limit=100", &p.secret).status, 200);
    assert_eq!(app.get("/contacts?limit=1", &p.secret).status, 200);
}

#[test]
fn search_and_subscribed_filters_narrow_the_list_and_its_total() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(&p.secret, json!({"email": "alice@acme.io"}));
    app.upsert(
        &p.secret,
        json!({"email": "bob@acme.io", "subscribed": false}),
    );
    app.upsert(&p.secret, json!({"email": "carol@other.org"}));
    let r = app.get("/contacts?search=ACME", &p.secret).json();
    let emails: HashSet<&str> = r["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, HashSet::from(["alice@acme.io", "bob@acme.io"]));
    assert_eq!(r["total"], 2);
    let r = app.get("/contacts?subscribed=false", &p.secret).json();
    assert_eq!(r["total"], 1);
    assert_eq!(r["contacts"][0]["email"], "bob@acme.io");
    assert_eq!(
        app.get("/contacts?subscribed=true", &p.secret).json()["total"],
        2
    );
    assert_eq!(
        app.get("/contacts?subscribed=true&search=acme", &p.secret)
            .json()["total"],
        1
    );
    assert_eq!(app.get("/contacts?subscribed=maybe", &p.secret).status, 422);
}

#[test]
fn another_projects_key_never_sees_or_touches_this_projects_contacts() {
    let app = TestApp::spawn();
    let mine = app.create_project("Mine");
    let theirs = app.create_project("Theirs");
    let c = app.upsert(
        &mine.secret,
        json!({"email": "private@example.com", "data": {"a": 1}}),
    );
    let path = format!("/contacts/{}", c["id"].as_str().unwrap());
    assert_eq!(app.get(&path, &theirs.secret).status, 404);
    assert_eq!(
        app.patch(&path, &theirs.secret, json!({"subscribed": false}))
            .status,
        404
    );
    assert_eq!(app.delete(&path, &theirs.secret).status, 404);
    let list = app.get("/contacts", &theirs.secret).json();
    assert_eq!(list["total"], 0);
    assert_eq!(list["contacts"], json!([]));
    let other = app.post(
        "/contacts",
        &theirs.secret,
        json!({"email": "private@example.com"}),
    );
    assert_eq!(
        other.status, 201,
        "the same email is a separate contact in another project"
    );
    assert_ne!(other.json()["id"], c["id"]);
    let still = app.get(&path, &mine.secret).json();
    assert_eq!(
        (still["subscribed"].clone(), still["data"].clone()),
        (json!(true), json!({"a": 1}))
    );
}

#[test]
fn eight_concurrent_writers_of_overlapping_emails_leave_one_contact_per_email() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    std::thread::scope(|s| {
        for w in 0..8 {
            let (app, key) = (&app, &p.secret);
            s.spawn(move || {
                for i in 0..40 {
                    let email = format!("shared{}@example.com", (i + w * 3) % 30);
                    app.upsert(key, json!({"email": email, "data": {format!("w{w}"): i}}));
                }
            });
        }
    });
    let emails = app.all_emails(&p.secret);
    let unique: HashSet<&String> = emails.iter().collect();
    assert_eq!(unique.len(), emails.len(), "no email appears twice");
    assert_eq!(emails.len(), 30);
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 30);
}
