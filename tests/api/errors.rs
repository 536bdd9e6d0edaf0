//! Bad input never gives a 5xx, never stops the server, and always gets the one error
//! body, with the request id of its `X-Request-Id` header.

use serde_json::json;

use crate::support::app::TestApp;

/// On a new connection: the server may close one that carried a request it refused.
fn assert_alive(app: &TestApp) {
    let r = ureq::get(&format!("{}/health", app.base))
        .call()
        .expect("the server still answers");
    assert_eq!(r.status(), 200);
}

#[test]
fn an_error_body_has_the_contract_shape_and_the_request_id_of_its_header() {
    let app = TestApp::spawn();
    let r = app.request("GET", "/contacts", None, None);
    let body = r.json();
    assert_eq!(body["success"], false);
    assert_eq!(body["error"]["statusCode"], 401);
    assert_eq!(
        body["message"], body["error"]["message"],
        "the top-level message mirrors error.message"
    );
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
    let header = r.header("X-Request-Id").expect("X-Request-Id");
    assert_eq!(body["error"]["requestId"], header);
    let ok = app.request("GET", "/health", None, None);
    assert!(
        ok.header("X-Request-Id").is_some(),
        "success responses carry it too"
    );
    assert_ne!(ok.header("X-Request-Id"), Some(header));
}

#[test]
fn a_body_that_is_not_json_gets_400_bad_request() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for body in [
        "{nope",
        "",
        "email=a@example.com",
        "{\"email\": \"a@example.com\"",
    ] {
        let r = app.request("POST", "/contacts", Some(&p.secret), Some(body));
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "BAD_REQUEST"),
            "{body:?}"
        );
    }
    assert_alive(&app);
}

#[test]
fn a_json_value_that_is_not_an_object_gets_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for body in ["[1,2]", "\"text\"", "42", "null"] {
        let r = app.request("POST", "/contacts", Some(&p.secret), Some(body));
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "VALIDATION_ERROR"),
            "{body}"
        );
    }
}

#[test]
fn wrong_types_are_all_listed_in_one_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": 5, "subscribed": "yes", "data": [1]}),
    );
    assert_eq!(r.status, 422);
    let errors = r.json()["error"]["errors"].clone();
    let fields: Vec<&str> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["email", "subscribed", "data"]);
    assert!(errors
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["code"] == "invalid_type"));
}

#[test]
fn a_missing_email_is_invalid_type_required_and_a_bad_one_is_invalid_string() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post("/contacts", &p.secret, json!({"subscribed": true}));
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["error"]["errors"][0],
        json!({"field": "email", "code": "invalid_type", "message": "Required"})
    );
    let r = app.post("/contacts", &p.secret, json!({"email": "not-an-email"}));
    assert_eq!(r.json()["error"]["errors"][0]["code"], "invalid_string");
}

#[test]
fn an_invalid_address_is_refused_with_the_reason_on_contacts_and_on_send() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for (email, why) in [
        ("ada.example.com", "there is no @"),
        ("@example.com", "the part before @ is empty"),
        ("ada@", "the part after @ is empty"),
        ("ada@example", "the domain needs a dot"),
        ("ada@@example.com", "there is more than one @"),
        ("ada lovelace@example.com", "a space"),
        ("ada..l@example.com", "two dots in a row"),
        ("ada@-example.com", "starts or ends with a hyphen"),
    ] {
        let r = app.post("/contacts", &p.secret, json!({"email": email}));
        assert_eq!(r.status, 422, "{email}: {}", r.text);
        let e = &r.json()["error"]["errors"][0];
        assert_eq!(
            (e["field"].as_str(), e["code"].as_str()),
            (Some("email"), Some("invalid_string")),
            "{e}"
        );
        let message = e["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("Invalid email: ") && message.contains(why),
            "{email}: {message}"
        );

        let r = app.post(
            "/v1/send",
            &p.secret,
            json!({"to": email, "from": "hello@acme.test", "subject": "s", "body": "b"}),
        );
        assert_eq!(r.status, 422, "{email}: {}", r.text);
        let e = &r.json()["error"]["errors"][0];
        assert_eq!(e["field"], "to", "{e}");
        let message = e["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{email} on /v1/send: {message}");
    }
}

#[test]
fn megabyte_strings_get_422_not_a_crash() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let big = "a".repeat(1 << 20);
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": format!("{big}@example.com")}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["errors"][0]["code"].as_str()),
        (422, Some("too_big"))
    );
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "a@example.com", "data": {"blob": big}}),
    );
    assert_eq!(
        (r.status, r.json()["error"]["errors"][0]["field"].as_str()),
        (422, Some("data"))
    );
    let r = app.get(&format!("/contacts?search={big}"), &p.secret);
    assert!(r.status < 500, "{}", r.status);
    assert_alive(&app);
}

#[test]
fn json_nested_ten_thousand_deep_gets_400_and_the_server_lives() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let r = app.request("POST", "/contacts", Some(&p.secret), Some(&deep));
    assert_eq!(r.status, 400);
    let deep_obj = format!(
        "{{\"email\":\"a@example.com\",\"data\":{}1{}}}",
        "{\"a\":".repeat(10_000),
        "}".repeat(10_000)
    );
    let r = app.request("POST", "/contacts", Some(&p.secret), Some(&deep_obj));
    assert_eq!(r.status, 400);
    assert_alive(&app);
}

#[test]
fn a_body_over_the_configured_maximum_gets_413() {
    let app = TestApp::spawn_with(|s| s.limits.max_body_bytes = 1024);
    let p = app.create_project("Acme");
    let body = json!({"email": "a@example.com", "data": {"pad": "x".repeat(2000)}}).to_string();
    let r = app.request("POST", "/contacts", Some(&p.secret), Some(&body));
    assert_eq!((r.status, r.code().as_str()), (413, "PAYLOAD_TOO_LARGE"));
    assert_alive(&app);
}

#[test]
fn unknown_routes_get_404_and_wrong_methods_get_405_in_the_error_body() {
    let app = TestApp::spawn();
    let r = app.request("GET", "/nope", None, None);
    assert_eq!((r.status, r.code().as_str()), (404, "RESOURCE_NOT_FOUND"));
    let r = app.request("PUT", "/contacts", None, Some("{}"));
    assert_eq!((r.status, r.code().as_str()), (405, "METHOD_NOT_ALLOWED"));
}

#[test]
fn a_bad_query_string_gets_400() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.get("/contacts?limit=%zz", &p.secret);
    assert!(r.status == 400 || r.status == 422, "{}", r.status);
    assert_alive(&app);
}

#[test]
fn a_full_project_mailbox_answers_503_with_retry_after() {
    let app = TestApp::spawn_with(|s| {
        s.actors.mailbox_capacity = 1;
        s.limits.requests_per_minute = 0;
    });
    let p = app.create_project("Acme");
    let statuses = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..16 {
            let (app, key, statuses) = (&app, &p.secret, &statuses);
            s.spawn(move || {
                for i in 0..10 {
                    let r = app.post(
                        "/contacts",
                        key,
                        json!({"email": format!("t{t}-{i}@example.com")}),
                    );
                    if r.status == 503 {
                        assert_eq!(r.code(), "SERVICE_UNAVAILABLE");
                        assert!(r.header("Retry-After").is_some());
                    }
                    statuses.lock().unwrap().push(r.status);
                }
            });
        }
    });
    let statuses = statuses.into_inner().unwrap();
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 503),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&503),
        "a mailbox of 1 under 16 writers refuses some"
    );
    let created = statuses.iter().filter(|s| **s == 201).count() as u64;
    assert_eq!(
        app.get("/contacts", &p.secret).json()["total"],
        created,
        "every 201 was kept"
    );
}
