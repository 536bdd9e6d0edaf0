//! Templates: create, read, update, delete, list filters, and syntax errors.

use serde_json::json;

use crate::support::app::TestApp;

fn create(app: &TestApp, key: &str, body: serde_json::Value) -> serde_json::Value {
    let r = app.post("/templates", key, body);
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

#[test]
fn a_template_is_created_with_every_field_and_read_back() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let t = create(
        &app,
        &p.secret,
        json!({"name": "Welcome", "subject": "Hi {{name ?? \"there\"}}", "body": "<p>{{ data.plan }}</p>",
               "type": "MARKETING", "from": "News@Acme.io", "fromName": "Acme", "replyTo": "help@acme.io",
               "description": "first mail"}),
    );
    assert_eq!(t["type"], "MARKETING");
    assert_eq!(t["from"], "news@acme.io");
    assert_eq!(t["fromName"], "Acme");
    assert_eq!(t["replyTo"], "help@acme.io");
    assert_eq!(t["description"], "first mail");
    let got = app.get(
        &format!("/templates/{}", t["id"].as_str().unwrap()),
        &p.secret,
    );
    assert_eq!(got.json(), t);
    let plain = create(
        &app,
        &p.secret,
        json!({"name": "T", "subject": "s", "body": "b"}),
    );
    assert_eq!(plain["type"], "TRANSACTIONAL", "the default type");
}

#[test]
fn a_template_that_does_not_compile_gets_422_template_syntax_naming_the_line() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"name": "Bad", "subject": "ok", "body": "line 1\nline 2 {{ oops"}),
    );
    assert_eq!(r.status, 422);
    let e = &r.json()["error"]["errors"][0];
    assert_eq!(
        (e["field"].as_str(), e["code"].as_str()),
        (Some("body"), Some("template_syntax"))
    );
    assert!(e["message"].as_str().unwrap().contains("line 2"), "{e}");
    assert_eq!(
        app.get("/templates", &p.secret).json()["total"],
        0,
        "nothing was stored"
    );
}

#[test]
fn missing_fields_wrong_types_and_bad_enums_are_listed_in_one_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"subject": 5, "type": "WEEKLY", "from": "nope"}),
    );
    assert_eq!(r.status, 422);
    let codes = r.field_codes();
    for expected in [
        ("name", "invalid_type"),
        ("subject", "invalid_type"),
        ("body", "invalid_type"),
        ("type", "invalid_enum_value"),
        ("from", "invalid_string"),
    ] {
        assert!(
            codes.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?} in {codes:?}"
        );
    }
    let huge = "x".repeat(2 << 20);
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"name": "T", "subject": "s", "body": huge}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["errors"][0]["code"].as_str()),
        (422, Some("too_big"))
    );
    let r = app.request("POST", "/templates", Some(&p.secret), Some("{not json"));
    assert_eq!(r.status, 400);
}

#[test]
fn patch_changes_only_the_given_fields_and_refuses_a_broken_subject() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let t = create(
        &app,
        &p.secret,
        json!({"name": "T", "subject": "Hello", "body": "<b>x</b>"}),
    );
    let path = format!("/templates/{}", t["id"].as_str().unwrap());
    let r = app.patch(&path, &p.secret, json!({"subject": "Hello {{name}}"}));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["subject"], "Hello {{name}}");
    assert_eq!(r.json()["body"], "<b>x</b>");
    let r = app.patch(&path, &p.secret, json!({"subject": "{% if %}"}));
    assert_eq!(
        (r.status, r.json()["error"]["errors"][0]["code"].as_str()),
        (422, Some("template_syntax"))
    );
    assert_eq!(
        app.get(&path, &p.secret).json()["subject"],
        "Hello {{name}}"
    );
}

#[test]
fn delete_answers_204_and_another_project_cannot_see_or_touch_a_template() {
    let app = TestApp::spawn();
    let mine = app.create_project("Mine");
    let theirs = app.create_project("Theirs");
    let t = create(
        &app,
        &mine.secret,
        json!({"name": "T", "subject": "s", "body": "b"}),
    );
    let path = format!("/templates/{}", t["id"].as_str().unwrap());
    let r = app.get(&path, &theirs.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "TEMPLATE_NOT_FOUND"));
    assert_eq!(
        app.patch(&path, &theirs.secret, json!({"name": "x"}))
            .status,
        404
    );
    assert_eq!(app.delete(&path, &theirs.secret).status, 404);
    assert_eq!(app.get(&path, &mine.public).status, 403);
    assert_eq!(app.delete(&path, &mine.secret).status, 204);
    assert_eq!(app.get(&path, &mine.secret).status, 404);
}

#[test]
fn the_list_filters_by_type_and_name_and_pages_with_page_numbers() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for i in 0..5 {
        create(
            &app,
            &p.secret,
            json!({"name": format!("Welcome {i}"), "subject": "s", "body": "b"}),
        );
    }
    create(
        &app,
        &p.secret,
        json!({"name": "Newsletter", "subject": "s", "body": "b", "type": "MARKETING"}),
    );
    let r = app.get("/templates?type=MARKETING", &p.secret).json();
    assert_eq!(
        (r["total"].clone(), r["templates"][0]["name"].clone()),
        (json!(1), json!("Newsletter"))
    );
    let first = app
        .get("/templates?search=welcome&limit=2", &p.secret)
        .json();
    assert_eq!(
        (
            first["total"].clone(),
            first["page"].clone(),
            first["pageSize"].clone(),
            first["totalPages"].clone()
        ),
        (json!(5), json!(1), json!(2), json!(3))
    );
    let second = app
        .get(
            &format!(
                "/templates?search=welcome&limit=2&cursor={}",
                first["cursor"].as_str().unwrap()
            ),
            &p.secret,
        )
        .json();
    assert_eq!(second["page"], 2);
    assert_ne!(second["templates"][0]["id"], first["templates"][0]["id"]);
    assert_eq!(app.get("/templates?type=WEEKLY", &p.secret).status, 422);
    assert_eq!(app.get("/templates?limit=0", &p.secret).status, 422);
}

#[test]
fn a_from_name_with_a_line_break_is_refused_on_create_and_on_patch() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let base = json!({"name": "T", "subject": "Hello", "body": "<b>x</b>"});
    let mut bad = base.clone();
    bad["fromName"] = json!("News\r\nBcc: all@example.com");
    let r = app.post("/templates", &p.secret, bad);
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.field_codes(),
        [("fromName".to_owned(), "invalid_string".to_owned())]
    );
    let t = create(&app, &p.secret, base);
    let path = format!("/templates/{}", t["id"].as_str().unwrap());
    let r = app.patch(&path, &p.secret, json!({"fromName": "A\nB"}));
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.field_codes(),
        [("fromName".to_owned(), "invalid_string".to_owned())]
    );
    assert_eq!(app.get(&path, &p.secret).json()["fromName"], json!(null));
}

/// The message of the one field error that POST /templates answers for this body.
fn syntax_error_of(app: &TestApp, key: &str, body: &str) -> String {
    let r = app.post(
        "/templates",
        key,
        json!({"name": "Broken", "subject": "ok", "body": body}),
    );
    assert_eq!(r.status, 422, "{body}: {}", r.text);
    let e = &r.json()["error"]["errors"][0];
    assert_eq!(
        (e["field"].as_str(), e["code"].as_str()),
        (Some("body"), Some("template_syntax")),
        "{e}"
    );
    e["message"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_broken_template_is_refused_with_a_message_that_says_what_is_missing_and_where() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for (body, says) in [
        (
            "<p>Hi</p>\n{% if vip %}\n<p>Thanks for being a VIP</p>",
            "`{% if %}` opened at line 2 is never closed; add `{% endif %}`",
        ),
        (
            "{% for item in items %}\n{% if item.new %}new{% endfor %}",
            "`{% endfor %}` at line 2 does not match the `{% if %}` opened at line 2",
        ),
        (
            "<p>a</p>\n<p>b</p>\n{% endif %}",
            "`{% endif %}` at line 3 closes nothing: no `{% if %}` is open",
        ),
        (
            "<p>a</p>\n{% else %}",
            "`{% else %}` at line 2 is not inside",
        ),
        (
            "<p>{{ name | upper }}</p>\n<p>{{ name | shout }}</p>",
            "at line 2: the filter `shout` is not available",
        ),
        (
            "<p>a</p>\n\n<p>{{ name </p>",
            "line 3: `{{` is never closed with `}}`",
        ),
    ] {
        let message = syntax_error_of(&app, &p.secret, body);
        assert!(message.contains(says), "{body:?}: {message}");
    }
}
