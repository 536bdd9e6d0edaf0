//! GET /events, /events/names and /events/{id}.

use serde_json::{json, Value};

use crate::support::app::TestApp;

fn track(app: &TestApp, key: &str, email: &str, event: &str) -> Value {
    let r = app.post("/v1/track", key, json!({"email": email, "event": event}));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["data"].clone()
}

fn names_of(list: &Value) -> Vec<String> {
    list["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn events_are_listed_newest_first_in_pages_with_a_stable_cursor() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for i in 0..5 {
        track(&app, &p.public, "a@example.com", &format!("step-{i}"));
    }
    let first = app.get("/events?limit=2", &p.secret).json();
    assert_eq!(names_of(&first), ["step-4", "step-3"]);
    assert_eq!(first["hasMore"], true);
    assert_eq!(first["total"], 5);
    // A new event does not shift the next page.
    track(&app, &p.public, "a@example.com", "step-5");
    let cursor = first["cursor"].as_str().unwrap();
    let second = app
        .get(&format!("/events?limit=2&cursor={cursor}"), &p.secret)
        .json();
    assert_eq!(names_of(&second), ["step-2", "step-1"]);
    let cursor = second["cursor"].as_str().unwrap();
    let last = app
        .get(&format!("/events?limit=2&cursor={cursor}"), &p.secret)
        .json();
    assert_eq!(names_of(&last), ["step-0"]);
    assert_eq!(last["hasMore"], false);
    assert_eq!(last["cursor"], Value::Null);
    let e = &last["events"][0];
    for key in [
        "id",
        "name",
        "contactId",
        "email",
        "data",
        "source",
        "createdAt",
    ] {
        assert!(e.get(key).is_some(), "event record lacks {key}: {e}");
    }
}

/// Follows `cursor` from the first page to the last and returns every event's id.
fn all_pages(app: &TestApp, key: &str, query: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .get(&format!("/events?limit=20&{query}{cursor}"), key)
            .json();
        ids.extend(
            page["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_owned()),
        );
        match page["cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => return ids,
        }
    }
}

#[test]
fn seventy_events_page_through_the_log_a_name_and_a_contact_without_gap_or_repeat() {
    // Enough for several of the log's blocks (4 events) and of an index's (16 ids).
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut tracked = Vec::new();
    for i in 0..70 {
        let name = if i % 2 == 0 { "even" } else { "odd" };
        let e = track(&app, &p.public, &format!("u{}@example.com", i % 2), name);
        tracked.push((e["event"].as_str().unwrap().to_owned(), name));
    }
    let newest_first: Vec<String> = tracked.iter().rev().map(|t| t.0.clone()).collect();
    assert_eq!(all_pages(&app, &p.secret, ""), newest_first);
    let evens: Vec<String> = tracked
        .iter()
        .rev()
        .filter(|t| t.1 == "even")
        .map(|t| t.0.clone())
        .collect();
    assert_eq!(all_pages(&app, &p.secret, "name=even&"), evens);
    assert_eq!(evens.len(), 35);
    // u0 tracked every even event: its own index crosses blocks too.
    assert_eq!(all_pages(&app, &p.secret, "email=u0@example.com&"), evens);
    let since = app.get(&format!("/events/{}", evens[9]), &p.secret).json();
    let since = since["createdAt"].as_str().unwrap().replace('+', "%2B");
    let recent = all_pages(
        &app,
        &p.secret,
        &format!("email=u0@example.com&since={since}&"),
    );
    assert!(
        recent.len() >= 10 && evens.starts_with(&recent),
        "{recent:?}"
    );
    // Totals with a time bound are counted over the index (or the log).
    let all_recent = all_pages(&app, &p.secret, &format!("since={since}&")).len();
    for (filter, expected) in [
        ("email=u0@example.com&", recent.len()),
        ("name=even&", recent.len()),
        ("", all_recent),
    ] {
        let page = app
            .get(&format!("/events?limit=5&{filter}since={since}"), &p.secret)
            .json();
        assert_eq!(page["total"], expected, "total for {filter}since");
    }
    for (id, name) in &tracked {
        let e = app.get(&format!("/events/{id}"), &p.secret).json();
        assert_eq!(
            (e["id"].as_str(), e["name"].as_str()),
            (Some(id.as_str()), Some(*name))
        );
    }
}

#[test]
fn events_filter_by_name_contact_email_and_time() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let a = track(&app, &p.public, "a@example.com", "login");
    track(&app, &p.public, "a@example.com", "purchase");
    track(&app, &p.public, "b@example.com", "login");
    track(&app, &p.public, "b@example.com", "login");

    let by_name = app.get("/events?name=login", &p.secret).json();
    assert_eq!(by_name["total"], 3);
    assert_eq!(names_of(&by_name), ["login", "login", "login"]);

    let contact = a["contact"].as_str().unwrap();
    let by_contact = app
        .get(&format!("/events?contactId={contact}"), &p.secret)
        .json();
    assert_eq!(names_of(&by_contact), ["purchase", "login"]);
    assert_eq!(by_contact["total"], 2);

    let by_email = app.get("/events?email=B@example.com", &p.secret).json();
    assert_eq!(by_email["total"], 2);
    assert!(by_email["events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["email"] == "b@example.com"));

    let both = app
        .get(
            &format!("/events?contactId={contact}&name=purchase"),
            &p.secret,
        )
        .json();
    assert_eq!(
        (names_of(&both).len(), both["total"].clone()),
        (1, json!(1))
    );

    let nobody = app
        .get("/events?email=nobody@example.com", &p.secret)
        .json();
    assert_eq!(nobody["total"], 0);

    let future = app
        .get("/events?since=2999-01-01T00:00:00Z", &p.secret)
        .json();
    assert_eq!(
        (future["total"].clone(), names_of(&future).len()),
        (json!(0), 0)
    );
    let past = app.get("/events?until=2000-01-01", &p.secret).json();
    assert_eq!(past["total"], 0);
    let window = app
        .get(
            "/events?since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z&name=login",
            &p.secret,
        )
        .json();
    assert_eq!(window["total"], 3);
    let since_first = a["timestamp"].as_str().unwrap();
    let since = app
        .get(
            &format!("/events?since={}", since_first.replace('+', "%2B")),
            &p.secret,
        )
        .json();
    assert_eq!(since["total"], 4, "since is inclusive");
}

#[test]
fn event_names_have_counts_and_last_seen_times() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    track(&app, &p.public, "a@example.com", "login");
    track(&app, &p.public, "b@example.com", "login");
    let last = track(&app, &p.public, "a@example.com", "purchase");
    let names = app.get("/events/names", &p.secret).json();
    assert_eq!(names["total"], 2);
    let list = names["names"].as_array().unwrap();
    let login = list.iter().find(|n| n["name"] == "login").unwrap();
    assert_eq!(login["count"], 2);
    let purchase = list.iter().find(|n| n["name"] == "purchase").unwrap();
    assert_eq!(purchase["count"], 1);
    assert_eq!(purchase["lastSeenAt"], last["timestamp"]);
}

#[test]
fn system_events_are_listed_with_source_system() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(&p.secret, json!({"email": "s@example.com"}));
    let id = c["id"].as_str().unwrap();
    app.patch(
        &format!("/contacts/{id}"),
        &p.secret,
        json!({"subscribed": false}),
    );
    let list = app
        .get("/events?name=contact.unsubscribed", &p.secret)
        .json();
    assert_eq!(list["total"], 1);
    assert_eq!(list["events"][0]["source"], "SYSTEM");
    assert_eq!(list["events"][0]["contactId"], c["id"]);
}

#[test]
fn a_missing_event_is_404_resource_not_found_also_across_projects() {
    let app = TestApp::spawn();
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let e = track(&app, &a.public, "a@example.com", "x");
    let id = e["event"].as_str().unwrap();
    assert_eq!(app.get(&format!("/events/{id}"), &a.secret).status, 200);
    for path in [
        format!("/events/{id}"),
        "/events/not-an-id".to_owned(),
        "/events/01900000-0000-7000-8000-000000000000".to_owned(),
    ] {
        let r = app.get(&path, &b.secret);
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "RESOURCE_NOT_FOUND"),
            "{path}"
        );
    }
    let other = app.get("/events", &b.secret).json();
    assert_eq!(other["total"], 0, "another project's events are not listed");
    assert_eq!(app.get("/events/names", &b.secret).json()["total"], 0);
}

#[test]
fn bad_query_parameters_are_422_and_keys_are_checked() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for q in [
        "limit=0",
        "limit=abc",
        "since=yesterday",
        "until=13/01/2026",
        "contactId=nope",
        "email=not-an-email",
        "cursor=bad",
    ] {
        let r = app.get(&format!("/events?{q}"), &p.secret);
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_ERROR"),
            "{q}"
        );
    }
    let long = "n".repeat(300);
    let r = app.get(&format!("/events?name={long}"), &p.secret);
    assert_eq!(r.status, 422, "an oversized name");
    let r = app.get("/events", &p.public);
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = app.get("/events/names", &format!("sk_{}", "z".repeat(40)));
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_API_KEY"));
}
