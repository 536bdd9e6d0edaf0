//! POST /v1/send: what is refused before anything is queued.

use serde_json::json;

use crate::support::app::TestApp;

#[test]
fn an_unverified_from_gets_422_unverified_domain_with_a_suggestion() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post("/v1/send", &p.secret, json!({"to": "a@example.com", "from": "me@unverified.example", "subject": "s", "body": "b"}));
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.field_codes(),
        [("from".to_owned(), "unverified_domain".to_owned())]
    );
    assert!(r.json()["error"]["suggestion"]
        .as_str()
        .unwrap()
        .contains("/domains"));
    assert_eq!(
        app.get("/contacts", &p.secret).json()["total"],
        0,
        "nothing was written"
    );
}

#[test]
fn a_public_key_gets_403() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/v1/send",
        &p.public,
        json!({"to": "a@example.com", "from": "me@x.example", "subject": "s", "body": "b"}),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
}

#[test]
fn subject_and_body_are_required_without_a_template() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "me@x.example"}),
    );
    assert_eq!(r.status, 422);
    let codes = r.field_codes();
    assert!(
        codes.contains(&("subject".into(), "invalid_type".into())),
        "{codes:?}"
    );
    assert!(
        codes.contains(&("body".into(), "invalid_type".into())),
        "{codes:?}"
    );
}

#[test]
fn every_bad_field_is_named() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["ok@example.com", "bad", {"name": "N"}, 5], "from": {"email": 3}, "subject": "s", "body": "b",
               "headers": {"X-Ok": "1", "From": "spoof", "X-Num": 2}, "reply": "nope", "subscribed": "yes", "data": []}),
    );
    assert_eq!(r.status, 422);
    let codes = r.field_codes();
    for expected in [
        ("to[1]", "invalid_string"),
        ("to[2].email", "invalid_type"),
        ("to[3]", "invalid_type"),
        ("from.email", "invalid_type"),
        ("headers.From", "custom"),
        ("headers.X-Num", "invalid_type"),
        ("reply", "invalid_string"),
        ("subscribed", "invalid_type"),
        ("data", "invalid_type"),
    ] {
        assert!(
            codes.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?} in {codes:?}"
        );
    }
}

#[test]
fn too_many_recipients_or_attachments_and_bad_base64_get_422() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let to: Vec<String> = (0..101).map(|i| format!("u{i}@example.com")).collect();
    let base = json!({"from": "me@x.example", "subject": "s", "body": "b"});
    let with = |k: &str, v: serde_json::Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let r = app.post("/v1/send", &p.secret, with("to", json!(to)));
    assert_eq!(r.field_codes(), [("to".to_owned(), "too_big".to_owned())]);
    let one = json!({"filename": "a.txt", "content": "aGVsbG8=", "contentType": "text/plain"});
    let mut b = with("to", json!("a@example.com"));
    b["attachments"] = json!(vec![one.clone(); 11]);
    let r = app.post("/v1/send", &p.secret, b.clone());
    assert_eq!(
        r.field_codes(),
        [("attachments".to_owned(), "too_big".to_owned())]
    );
    b["attachments"] = json!([{"filename": "a.txt", "content": "%%%not base64%%%"}]);
    let r = app.post("/v1/send", &p.secret, b.clone());
    assert_eq!(
        r.field_codes(),
        [(
            "attachments[0].content".to_owned(),
            "invalid_string".to_owned()
        )]
    );
    b["attachments"] = json!([{"content": "aGVsbG8="}]);
    let r = app.post("/v1/send", &p.secret, b);
    assert_eq!(
        r.field_codes(),
        [(
            "attachments[0].filename".to_owned(),
            "invalid_type".to_owned()
        )]
    );
    let r = app.post("/v1/send", &p.secret, with("to", json!([])));
    assert_eq!(r.status, 422);
}

#[test]
fn an_unknown_or_foreign_template_gets_404_template_not_found() {
    let app = TestApp::spawn();
    let mine = app.create_project("Mine");
    let theirs = app.create_project("Theirs");
    let t = app
        .post(
            "/templates",
            &theirs.secret,
            json!({"name": "T", "subject": "s", "body": "b", "from": "a@x.example"}),
        )
        .json();
    for id in [t["id"].as_str().unwrap(), "nope"] {
        let r = app.post(
            "/v1/send",
            &mine.secret,
            json!({"to": "a@example.com", "template": id}),
        );
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "TEMPLATE_NOT_FOUND"),
            "{id}"
        );
    }
}

#[test]
fn a_malformed_body_gets_400_and_an_unknown_email_id_404() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.request("POST", "/v1/send", Some(&p.secret), Some("{\"to\":"));
    assert_eq!(r.status, 400);
    let r = app.get("/emails/01a20599-399a-725c-8571-30c7383e660f", &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "RESOURCE_NOT_FOUND"));
}

#[test]
fn headers_that_speak_for_mailroom_the_relay_or_a_receiver_are_refused_by_name() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for name in [
        "Sender",
        "Return-Path",
        "List-Unsubscribe",
        "List-Unsubscribe-Post",
        "Resent-From",
        "resent-date",
        "Received",
        "Authentication-Results",
        "ARC-Seal",
        "ARC-Message-Signature",
        "Content-Type",
        "Content-Disposition",
        "MIME-Version",
        "DKIM-Signature",
    ] {
        let r = app.post(
            "/v1/send",
            &p.secret,
            json!({"to": "a@example.com", "from": "me@x.example", "subject": "s", "body": "b",
                   "headers": {name: "forged"}}),
        );
        assert_eq!(r.status, 422, "{name}: {}", r.text);
        let field = format!("headers.{name}");
        assert!(
            r.field_codes()
                .contains(&(field.clone(), "custom".to_owned())),
            "{name}: {:?}",
            r.field_codes()
        );
    }
}

#[test]
fn a_display_name_with_a_line_break_is_refused_wherever_it_is_given() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["ok@example.com", {"name": "Ada\r\nBcc: all@example.com", "email": "a@example.com"}],
               "from": {"name": "News\n", "email": "me@x.example"}, "name": "Team\tA",
               "subject": "s", "body": "b"}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let codes = r.field_codes();
    for expected in [
        ("to[1].name", "invalid_string"),
        ("from.name", "invalid_string"),
        ("name", "invalid_string"),
    ] {
        assert!(
            codes.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?} in {codes:?}"
        );
    }
    assert_eq!(
        app.get("/contacts", &p.secret).json()["total"],
        0,
        "nothing was written"
    );
}
