//! Segments: records, the filter language, STATIC members, membership events.

use serde_json::{json, Value};

use crate::support::app::{assert_over_filter_budget, Project, TestApp};

fn iso_days_ago(days: i64) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - days * 86_400;
    // Civil date from days since the epoch (Howard Hinnant's algorithm), to stay std-only.
    let (z, secs) = (t.div_euclid(86_400) + 719_468, t.rem_euclid(86_400));
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Three contacts with varied data; ada bought something and bob logged in.
fn audience(app: &TestApp) -> Project {
    let p = app.create_project("Acme");
    app.upsert(
        &p.secret,
        json!({"email": "ada@acme.com", "data": {"plan": "pro", "seats": 10, "tags": ["beta", "vip"],
               "company": {"size": 50}, "lastSeen": iso_days_ago(10)}}),
    );
    app.upsert(
        &p.secret,
        json!({"email": "bob@example.com", "subscribed": false, "data": {"plan": "free", "seats": 1,
               "tags": ["beta"], "lastSeen": iso_days_ago(1)}}),
    );
    app.upsert(
        &p.secret,
        json!({"email": "cy@acme.io", "data": {"plan": "team", "seats": 5}}),
    );
    for (email, event) in [("ada@acme.com", "purchase"), ("bob@example.com", "login")] {
        let r = app.post(
            "/v1/track",
            &p.public,
            json!({"email": email, "event": event}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    p
}

fn create(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post("/segments", key, body);
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

fn emails_of(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["email"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

/// The members of a new DYNAMIC segment with this filter; checks that memberCount,
/// the contacts list and its total agree.
fn members(app: &TestApp, key: &str, filters: Value) -> Vec<String> {
    let s = create(app, key, json!({"name": "probe", "filters": filters}));
    let id = s["id"].as_str().unwrap();
    let list = app
        .get(&format!("/segments/{id}/contacts?limit=100"), key)
        .json();
    let emails = emails_of(&list);
    assert_eq!(s["memberCount"], emails.len(), "memberCount for {filters}");
    assert_eq!(list["total"], emails.len(), "total for {filters}");
    emails
}

fn one(field: &str, op: &str, value: Value) -> Value {
    json!({"operator": "AND", "conditions": [{"field": field, "operator": op, "value": value}]})
}

fn period(field: &str, op: &str, n: i64, unit: &str) -> Value {
    json!({"operator": "AND", "conditions": [{"field": field, "operator": op, "value": n, "unit": unit}]})
}

const ADA: &str = "ada@acme.com";
const BOB: &str = "bob@example.com";
const CY: &str = "cy@acme.io";

#[test]
fn every_operator_selects_the_documented_contacts() {
    let app = TestApp::spawn();
    let p = audience(&app);
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (one("email", "equals", json!("ADA@acme.com")), vec![ADA]),
        (one("email", "notEquals", json!(ADA)), vec![BOB, CY]),
        (one("email", "contains", json!("acme")), vec![ADA, CY]),
        (one("email", "notContains", json!("acme")), vec![BOB]),
        (one("email", "in", json!([ADA, BOB])), vec![ADA, BOB]),
        (one("email", "notIn", json!([ADA])), vec![BOB, CY]),
        (one("subscribed", "equals", json!(true)), vec![ADA, CY]),
        (one("subscribed", "notEquals", json!(true)), vec![BOB]),
        (one("data.plan", "equals", json!("pro")), vec![ADA]),
        (one("data.plan", "notEquals", json!("pro")), vec![BOB, CY]),
        (one("data.tags", "contains", json!("vip")), vec![ADA]),
        (one("data.tags", "notContains", json!("vip")), vec![BOB, CY]),
        (one("data.plan", "contains", json!("ea")), vec![CY]),
        (one("data.seats", "greaterThan", json!(5)), vec![ADA]),
        (one("data.seats", "lessThan", json!(5)), vec![BOB]),
        (
            one("data.seats", "greaterThanOrEqual", json!(5)),
            vec![ADA, CY],
        ),
        (
            one("data.seats", "lessThanOrEqual", json!(5)),
            vec![BOB, CY],
        ),
        (one("data.company.size", "exists", Value::Null), vec![ADA]),
        (
            one("data.company.size", "notExists", Value::Null),
            vec![BOB, CY],
        ),
        (
            one("data.plan", "in", json!(["pro", "team"])),
            vec![ADA, CY],
        ),
        (one("data.plan", "notIn", json!(["pro", "team"])), vec![BOB]),
        (period("data.lastSeen", "within", 7, "days"), vec![BOB]),
        (
            period("data.lastSeen", "olderThan", 7 * 24, "hours"),
            vec![ADA],
        ),
        (
            period("createdAt", "within", 60, "minutes"),
            vec![ADA, BOB, CY],
        ),
        (period("createdAt", "olderThan", 1, "days"), vec![]),
        (
            period("updatedAt", "olderThan", 0, "minutes"),
            vec![ADA, BOB, CY],
        ),
        (
            one("createdAt", "greaterThan", json!("2000-01-01T00:00:00Z")),
            vec![ADA, BOB, CY],
        ),
        (one("createdAt", "lessThan", json!("2000-01-01")), vec![]),
        (
            one(
                "updatedAt",
                "lessThanOrEqual",
                json!("2999-01-01T00:00:00Z"),
            ),
            vec![ADA, BOB, CY],
        ),
        (
            json!({"operator": "AND", "conditions": [{"field": "event.purchase", "operator": "triggered"}]}),
            vec![ADA],
        ),
        (
            json!({"operator": "AND", "conditions": [{"field": "event.purchase", "operator": "notTriggered"}]}),
            vec![BOB, CY],
        ),
        (
            period("event.purchase", "triggeredWithin", 1, "hours"),
            vec![ADA],
        ),
        (
            period("event.login", "triggeredOlderThan", 1, "hours"),
            vec![],
        ),
        (
            period("event.purchase", "triggeredOlderThan", 0, "minutes"),
            vec![ADA],
        ),
    ];
    for (filters, expected) in cases {
        assert_eq!(
            members(&app, &p.secret, filters.clone()),
            expected,
            "{filters}"
        );
    }
}

#[test]
fn an_or_group_nested_inside_an_and_group() {
    let app = TestApp::spawn();
    let p = audience(&app);
    let f = json!({"operator": "AND", "conditions": [
        {"field": "subscribed", "operator": "equals", "value": true},
        {"operator": "OR", "conditions": [
            {"field": "data.plan", "operator": "equals", "value": "pro"},
            {"field": "email", "operator": "contains", "value": ".io"}
        ]}
    ]});
    assert_eq!(members(&app, &p.secret, f), [ADA, CY]);
    let deeper = json!({"operator": "OR", "conditions": [
        {"operator": "AND", "conditions": [
            {"field": "data.plan", "operator": "equals", "value": "free"},
            {"operator": "OR", "conditions": [
                {"field": "event.login", "operator": "triggered"},
                {"field": "data.seats", "operator": "greaterThan", "value": 100}
            ]}
        ]},
        {"field": "data.seats", "operator": "equals", "value": 5}
    ]});
    assert_eq!(members(&app, &p.secret, deeper), [BOB, CY]);
}

#[test]
fn an_unknown_or_misfitting_operator_is_422_naming_the_condition() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let cases = [
        (
            json!({"operator": "AND", "conditions": [{"operator": "OR", "conditions": [
                {"field": "email", "operator": "startsWith", "value": "a"}]}]}),
            "filters.conditions.0.conditions.0.operator",
            "invalid_enum_value",
        ),
        (
            one("subscribed", "contains", json!("x")),
            "filters.conditions.0.operator",
            "custom",
        ),
        (
            one("event.signup", "equals", json!("x")),
            "filters.conditions.0.operator",
            "custom",
        ),
        (
            one("createdAt", "in", json!(["x"])),
            "filters.conditions.0.operator",
            "custom",
        ),
        (
            one("data.plan", "triggered", json!(1)),
            "filters.conditions.0.operator",
            "custom",
        ),
        (
            one("data.plan", "in", json!("pro")),
            "filters.conditions.0.value",
            "invalid_type",
        ),
        (
            period("createdAt", "within", 7, "weeks"),
            "filters.conditions.0.unit",
            "invalid_enum_value",
        ),
        (
            one("nope", "equals", json!(1)),
            "filters.conditions.0.field",
            "invalid_enum_value",
        ),
        (
            json!({"operator": "XOR", "conditions": []}),
            "filters.operator",
            "invalid_enum_value",
        ),
        (
            json!({"operator": "AND", "conditions": {}}),
            "filters.conditions",
            "invalid_type",
        ),
    ];
    for (filters, field, code) in cases {
        let r = app.post(
            "/segments",
            &p.secret,
            json!({"name": "Bad", "filters": filters}),
        );
        assert_eq!(r.status, 422, "{filters}: {}", r.text);
        let e = &r.json()["error"]["errors"][0];
        assert_eq!(
            (e["field"].as_str(), e["code"].as_str()),
            (Some(field), Some(code)),
            "{filters}"
        );
    }
    assert_eq!(app.get("/segments", &p.secret).json()["total"], 0);
}

#[test]
fn a_segment_record_can_be_read_listed_updated_and_deleted() {
    let app = TestApp::spawn();
    let p = audience(&app);
    let s = create(
        &app,
        &p.secret,
        json!({"name": "Pro", "description": "paying", "filters": one("data.plan", "equals", json!("pro")),
               "trackMembership": true}),
    );
    assert_eq!(s["type"], "DYNAMIC");
    assert_eq!(s["memberCount"], 1);
    assert_eq!(s["trackMembership"], true);
    assert_eq!(s["description"], "paying");
    assert_eq!(s["filters"]["conditions"][0]["field"], "data.plan");
    for key in ["id", "name", "createdAt", "updatedAt"] {
        assert!(s.get(key).is_some(), "{key}");
    }
    let id = s["id"].as_str().unwrap();
    assert_eq!(app.get(&format!("/segments/{id}"), &p.secret).json(), s);

    let r = app.patch(
        &format!("/segments/{id}"),
        &p.secret,
        json!({"name": "Paying", "filters": one("data.plan", "in", json!(["pro", "team"]))}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let updated = r.json();
    assert_eq!(
        (updated["name"].as_str(), updated["memberCount"].as_u64()),
        (Some("Paying"), Some(2))
    );
    assert_eq!(
        updated["description"], "paying",
        "an omitted field is unchanged"
    );

    // Membership is exact at read time: a contact that starts matching is counted.
    app.upsert(
        &p.secret,
        json!({"email": "bob@example.com", "data": {"plan": "pro"}}),
    );
    assert_eq!(
        app.get(&format!("/segments/{id}"), &p.secret).json()["memberCount"],
        3
    );

    create(&app, &p.secret, json!({"name": "Second", "type": "STATIC"}));
    create(&app, &p.secret, json!({"name": "Third", "type": "STATIC"}));
    let page = app.get("/segments?limit=2", &p.secret).json();
    assert_eq!(page["total"], 3);
    assert_eq!(page["hasMore"], true);
    assert_eq!(page["segments"][0]["name"], "Third", "newest first");
    let cursor = page["cursor"].as_str().unwrap();
    let rest = app
        .get(&format!("/segments?limit=2&cursor={cursor}"), &p.secret)
        .json();
    assert_eq!(rest["segments"][0]["name"], "Paying");
    assert_eq!(rest["segments"][0]["memberCount"], 3);
    assert_eq!(rest["cursor"], Value::Null);

    assert_eq!(
        app.delete(&format!("/segments/{id}"), &p.secret).status,
        204
    );
    let r = app.get(&format!("/segments/{id}"), &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "SEGMENT_NOT_FOUND"));
    assert_eq!(app.get("/segments", &p.secret).json()["total"], 2);
}

#[test]
fn segment_contacts_page_newest_first() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for i in 0..5 {
        app.upsert(
            &p.secret,
            json!({"email": format!("u{i}@example.com"), "data": {"n": i}}),
        );
    }
    let s = create(
        &app,
        &p.secret,
        json!({"name": "Most", "filters": one("data.n", "greaterThan", json!(0))}),
    );
    let id = s["id"].as_str().unwrap();
    let first = app
        .get(&format!("/segments/{id}/contacts?limit=3"), &p.secret)
        .json();
    let names: Vec<&str> = first["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["u4@example.com", "u3@example.com", "u2@example.com"]
    );
    assert_eq!(
        (first["total"].as_u64(), first["hasMore"].as_bool()),
        (Some(4), Some(true))
    );
    let cursor = first["cursor"].as_str().unwrap();
    let second = app
        .get(
            &format!("/segments/{id}/contacts?limit=3&cursor={cursor}"),
            &p.secret,
        )
        .json();
    assert_eq!(emails_of(&second), ["u1@example.com"]);
    assert_eq!(second["hasMore"], false);
}

#[test]
fn static_members_are_added_and_removed_by_email() {
    let app = TestApp::spawn();
    let p = audience(&app);
    let s = create(&app, &p.secret, json!({"name": "VIPs", "type": "STATIC"}));
    assert_eq!(
        (s["type"].as_str(), s["memberCount"].as_u64()),
        (Some("STATIC"), Some(0))
    );
    assert_eq!(s["filters"], Value::Null);
    let id = s["id"].as_str().unwrap();
    let path = format!("/segments/{id}/members");

    let r = app.post(
        &path,
        &p.secret,
        json!({"emails": [ADA, BOB, "nobody@example.com", "ADA@acme.com"]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"added": 2, "notFound": ["nobody@example.com"]})
    );
    let again = app.post(&path, &p.secret, json!({"emails": [ADA]}));
    assert_eq!(
        again.json(),
        json!({"added": 0, "notFound": []}),
        "already a member"
    );
    let list = app
        .get(&format!("/segments/{id}/contacts"), &p.secret)
        .json();
    assert_eq!(emails_of(&list), [ADA, BOB]);
    assert_eq!(list["contacts"][0]["email"], BOB, "newest contact first");
    assert_eq!(
        app.get(&format!("/segments/{id}"), &p.secret).json()["memberCount"],
        2
    );

    let r = app.request(
        "DELETE",
        &path,
        Some(&p.secret),
        Some(&json!({"emails": [ADA, CY, "ghost@example.com"]}).to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"removed": 1, "notFound": ["ghost@example.com"]})
    );
    assert_eq!(
        app.get(&format!("/segments/{id}"), &p.secret).json()["memberCount"],
        1
    );

    // A deleted contact leaves the segment.
    let bob = app.get("/contacts?search=bob", &p.secret).json()["contacts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        app.delete(&format!("/contacts/{bob}"), &p.secret).status,
        204
    );
    let s = app.get(&format!("/segments/{id}"), &p.secret).json();
    assert_eq!(s["memberCount"], 0);
    assert_eq!(
        app.get(&format!("/segments/{id}/contacts"), &p.secret)
            .json()["contacts"],
        json!([])
    );
}

#[test]
fn members_of_a_dynamic_segment_cannot_be_changed_and_static_ones_take_no_filters() {
    let app = TestApp::spawn();
    let p = audience(&app);
    let s = create(
        &app,
        &p.secret,
        json!({"name": "Pro", "filters": one("data.plan", "equals", json!("pro"))}),
    );
    let path = format!("/segments/{}/members", s["id"].as_str().unwrap());
    let r = app.post(&path, &p.secret, json!({"emails": [BOB]}));
    assert_eq!((r.status, r.code().as_str()), (409, "CONFLICT"));
    let r = app.request(
        "DELETE",
        &path,
        Some(&p.secret),
        Some(&json!({"emails": [ADA]}).to_string()),
    );
    assert_eq!((r.status, r.code().as_str()), (409, "CONFLICT"));

    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "S", "type": "STATIC", "filters": one("data.plan", "equals", json!("pro"))}),
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["error"]["errors"][0]["field"], "filters");
    let st = create(&app, &p.secret, json!({"name": "S", "type": "STATIC"}));
    let r = app.patch(
        &format!("/segments/{}", st["id"].as_str().unwrap()),
        &p.secret,
        json!({"filters": one("data.plan", "equals", json!("pro"))}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
}

fn count(app: &TestApp, key: &str, query: &str) -> u64 {
    app.get(&format!("/events?{query}"), key).json()["total"]
        .as_u64()
        .unwrap()
}

#[test]
fn entry_and_exit_events_follow_upserts_and_patches_and_only_real_changes() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    create(
        &app,
        &p.secret,
        json!({"name": "Pro Users!", "trackMembership": true,
        "filters": one("data.plan", "equals", json!("pro"))}),
    );
    create(
        &app,
        &p.secret,
        json!({"name": "Untracked", "filters": one("data.plan", "equals", json!("pro"))}),
    );
    let entry = "name=segment.pro-users.entry";
    let exit = "name=segment.pro-users.exit";

    let x = app.upsert(
        &p.secret,
        json!({"email": "x@example.com", "data": {"plan": "free"}}),
    );
    let y = app.upsert(
        &p.secret,
        json!({"email": "y@example.com", "data": {"plan": "free"}}),
    );
    assert_eq!(count(&app, &p.secret, entry), 0, "not matching: no event");
    app.upsert(
        &p.secret,
        json!({"email": "x@example.com", "data": {"plan": "pro"}}),
    );
    assert_eq!(count(&app, &p.secret, entry), 1, "x entered");
    let e = &app.get(&format!("/events?{entry}"), &p.secret).json()["events"][0];
    assert_eq!(
        (e["contactId"].clone(), e["source"].as_str()),
        (x["id"].clone(), Some("SYSTEM"))
    );
    app.upsert(
        &p.secret,
        json!({"email": "x@example.com", "data": {"city": "Oslo"}}),
    );
    app.upsert(
        &p.secret,
        json!({"email": "y@example.com", "data": {"city": "Oslo"}}),
    );
    assert_eq!(
        count(&app, &p.secret, entry),
        1,
        "still a member: no second entry"
    );
    assert_eq!(count(&app, &p.secret, exit), 0);
    let id = x["id"].as_str().unwrap();
    app.patch(
        &format!("/contacts/{id}"),
        &p.secret,
        json!({"data": {"plan": "free"}}),
    );
    assert_eq!(count(&app, &p.secret, exit), 1, "x left");
    let y_id = y["id"].as_str().unwrap();
    assert_eq!(
        count(
            &app,
            &p.secret,
            &format!("contactId={y_id}&name=segment.pro-users.entry")
        ),
        0
    );
    assert_eq!(
        count(&app, &p.secret, "name=segment.untracked.entry"),
        0,
        "untracked segments record nothing"
    );
    // A new contact that matches at once enters.
    app.upsert(
        &p.secret,
        json!({"email": "z@example.com", "data": {"plan": "pro"}}),
    );
    assert_eq!(count(&app, &p.secret, entry), 2);
}

#[test]
fn a_tracked_event_can_make_a_contact_enter_once() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    create(
        &app,
        &p.secret,
        json!({"name": "Buyers", "trackMembership": true, "filters":
        {"operator": "AND", "conditions": [{"field": "event.purchase", "operator": "triggered"}]}}),
    );
    for _ in 0..2 {
        let r = app.post(
            "/v1/track",
            &p.public,
            json!({"email": "b@example.com", "event": "purchase"}),
        );
        assert_eq!(r.status, 200);
    }
    assert_eq!(count(&app, &p.secret, "name=segment.buyers.entry"), 1);
    let names = app.get("/events/names", &p.secret).json();
    assert!(names["names"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["name"] == "segment.buyers.entry" && n["count"] == 1));
}

#[test]
fn editing_a_tracked_filter_records_entries_and_exits_for_the_contacts_that_moved() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for (email, plan) in [
        ("t@example.com", "team"),
        ("p@example.com", "pro"),
        ("f@example.com", "free"),
    ] {
        app.upsert(&p.secret, json!({"email": email, "data": {"plan": plan}}));
    }
    let s = create(
        &app,
        &p.secret,
        json!({"name": "Paid", "trackMembership": true,
        "filters": one("data.plan", "in", json!(["team", "pro"]))}),
    );
    assert_eq!(
        count(&app, &p.secret, "name=segment.paid.entry"),
        0,
        "creating a segment records nothing"
    );
    let r = app.patch(
        &format!("/segments/{}", s["id"].as_str().unwrap()),
        &p.secret,
        json!({"filters": one("data.plan", "in", json!(["pro", "free"]))}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let entries = app.get("/events?name=segment.paid.entry", &p.secret).json();
    let exits = app.get("/events?name=segment.paid.exit", &p.secret).json();
    assert_eq!(entries["total"], 1);
    assert_eq!(entries["events"][0]["email"], "f@example.com");
    assert_eq!(exits["total"], 1);
    assert_eq!(exits["events"][0]["email"], "t@example.com");
}

#[test]
fn adding_to_a_tracked_static_segment_records_entries() {
    let app = TestApp::spawn();
    let p = audience(&app);
    let s = create(
        &app,
        &p.secret,
        json!({"name": "Hand Picked", "type": "STATIC", "trackMembership": true}),
    );
    let path = format!("/segments/{}/members", s["id"].as_str().unwrap());
    app.post(&path, &p.secret, json!({"emails": [ADA, BOB]}));
    app.request(
        "DELETE",
        &path,
        Some(&p.secret),
        Some(&json!({"emails": [BOB]}).to_string()),
    );
    assert_eq!(count(&app, &p.secret, "name=segment.hand-picked.entry"), 2);
    assert_eq!(count(&app, &p.secret, "name=segment.hand-picked.exit"), 1);
}

fn first_error(
    app: &TestApp,
    method: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> (u16, String, String) {
    let r = app.request(method, path, Some(key), Some(&body.to_string()));
    let e = r.json()["error"]["errors"][0].clone();
    (
        r.status,
        e["field"].as_str().unwrap_or_default().to_owned(),
        e["code"].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn create_and_update_refuse_missing_wrong_and_oversized_fields() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let f = one("data.plan", "equals", json!("pro"));
    let big = json!({"operator": "OR", "conditions": (0..2000).map(|i| json!({"field": "data.k", "operator": "equals", "value": format!("value-{i}")})).collect::<Vec<_>>()});
    let cases = [
        (json!({"filters": f}), "name", "invalid_type"),
        (json!({"name": "N"}), "filters", "invalid_type"),
        (json!({"name": 5, "filters": f}), "name", "invalid_type"),
        (
            json!({"name": "N", "filters": f, "trackMembership": "yes"}),
            "trackMembership",
            "invalid_type",
        ),
        (
            json!({"name": "N", "filters": f, "type": "WEIRD"}),
            "type",
            "invalid_enum_value",
        ),
        (
            json!({"name": "N".repeat(101), "filters": f}),
            "name",
            "too_big",
        ),
        (
            json!({"name": "!!!", "filters": f}),
            "name",
            "invalid_string",
        ),
        (
            json!({"name": "N", "filters": "data.plan = pro"}),
            "filters",
            "invalid_type",
        ),
        (json!({"name": "N", "filters": big}), "filters", "too_big"),
    ];
    for (body, field, code) in cases {
        assert_eq!(
            first_error(&app, "POST", "/segments", &p.secret, &body),
            (422, field.to_owned(), code.to_owned()),
            "{}",
            &body.to_string()[..body.to_string().len().min(200)]
        );
    }
    let s = create(&app, &p.secret, json!({"name": "N", "filters": f}));
    let path = format!("/segments/{}", s["id"].as_str().unwrap());
    assert_eq!(
        first_error(&app, "PATCH", &path, &p.secret, &json!({"name": 7})),
        (422, "name".into(), "invalid_type".into())
    );
    assert_eq!(
        first_error(
            &app,
            "PATCH",
            &path,
            &p.secret,
            &json!({"trackMembership": 1})
        ),
        (422, "trackMembership".into(), "invalid_type".into())
    );
    assert_eq!(first_error(&app, "PATCH", &path, &p.secret, &json!({"filters": {"operator": "AND", "conditions": [{"field": "email", "operator": "near"}]}})).0, 422);
    for (method, p2) in [("POST", "/segments".to_owned()), ("PATCH", path.clone())] {
        let r = app.request(method, &p2, Some(&p.secret), Some("{\"name\":"));
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "BAD_REQUEST"),
            "{method}"
        );
    }
}

#[test]
fn members_calls_refuse_missing_wrong_and_oversized_email_lists() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let s = create(&app, &p.secret, json!({"name": "S", "type": "STATIC"}));
    let path = format!("/segments/{}/members", s["id"].as_str().unwrap());
    let many: Vec<String> = (0..1001).map(|i| format!("u{i}@example.com")).collect();
    let cases = [
        (json!({}), "emails", "invalid_type"),
        (json!({"emails": "a@example.com"}), "emails", "invalid_type"),
        (json!({"emails": []}), "emails", "too_small"),
        (json!({"emails": many}), "emails", "too_big"),
        (
            json!({"emails": ["ok@example.com", "nope"]}),
            "emails.1",
            "invalid_string",
        ),
        (json!({"emails": [5]}), "emails.0", "invalid_type"),
    ];
    for method in ["POST", "DELETE"] {
        for (body, field, code) in &cases {
            assert_eq!(
                first_error(&app, method, &path, &p.secret, body),
                (422, field.to_string(), code.to_string()),
                "{method} {body}"
            );
        }
        let r = app.request(method, &path, Some(&p.secret), Some("[1"));
        assert_eq!(r.status, 400);
    }
}

#[test]
fn another_projects_segment_is_not_found_and_keys_are_checked() {
    let app = TestApp::spawn();
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let s = create(&app, &a.secret, json!({"name": "S", "type": "STATIC"}));
    let id = s["id"].as_str().unwrap();
    let emails = json!({"emails": ["a@example.com"]}).to_string();
    for (method, path, body) in [
        ("GET", format!("/segments/{id}"), None),
        (
            "PATCH",
            format!("/segments/{id}"),
            Some("{\"name\": \"X\"}"),
        ),
        ("DELETE", format!("/segments/{id}"), None),
        ("GET", format!("/segments/{id}/contacts"), None),
        (
            "POST",
            format!("/segments/{id}/members"),
            Some(emails.as_str()),
        ),
        (
            "DELETE",
            format!("/segments/{id}/members"),
            Some(emails.as_str()),
        ),
        ("GET", "/segments/not-an-id".to_owned(), None),
    ] {
        let r = app.request(method, &path, Some(&b.secret), body);
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "SEGMENT_NOT_FOUND"),
            "{method} {path}"
        );
    }
    assert_eq!(
        app.get(&format!("/segments/{id}"), &a.secret).status,
        200,
        "untouched"
    );
    assert_eq!(app.get("/segments", &b.secret).json()["total"], 0);

    let r = app.get("/segments", &a.public);
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = app.get("/segments", &format!("sk_{}", "q".repeat(40)));
    assert_eq!((r.status, r.code().as_str()), (401, "INVALID_API_KEY"));
    let r = app.get(&format!("/segments/{id}/contacts?limit=0"), &a.secret);
    assert_eq!(r.status, 422);
    let r = app.get("/segments?limit=101", &a.secret);
    assert_eq!(r.status, 422);
}

/// A DYNAMIC segment of `n` conditions, each a `notIn` list.
fn n_conditions(n: usize) -> Value {
    let conditions: Vec<Value> = (0..n)
        .map(
            |i| json!({"field": format!("data.k{i}"), "operator": "notIn", "value": [1, "1", 2.5]}),
        )
        .collect();
    json!({"operator": "AND", "conditions": conditions})
}

#[test]
fn a_filter_past_the_evaluation_budget_gets_422_too_big_before_anything_is_written() {
    let app = TestApp::spawn_with(|s| s.limits.max_filter_evaluations = 10);
    let p = app.create_project("Acme");
    for (email, k0) in [
        ("a@example.com", json!(1.0)),
        ("b@example.com", json!("x")),
        ("c@example.com", json!(null)),
    ] {
        app.upsert(&p.secret, json!({"email": email, "data": {"k0": k0}}));
    }
    // Three contacts and three conditions: 9 evaluations, within 10.
    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Three", "filters": n_conditions(3)}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.json()["memberCount"],
        2,
        "only a's k0 = 1.0 is in [1, \"1\", 2.5]: {}",
        r.text
    );
    let three = r.json()["id"].as_str().unwrap().to_owned();

    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Four", "filters": n_conditions(4)}),
    );
    assert_over_filter_budget(&r, "filters");
    let r = app.patch(
        &format!("/segments/{three}"),
        &p.secret,
        json!({"filters": n_conditions(4)}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = app.get("/segments", &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json()["total"],
        1,
        "the refused create wrote nothing: {}",
        r.text
    );

    // One list is one request: two segments of three conditions are 18 evaluations.
    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Again", "filters": n_conditions(3)}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.get("/segments", &p.secret);
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.field_codes(),
        [("filters".to_owned(), "too_big".to_owned())]
    );
}
