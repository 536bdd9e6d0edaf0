//! The template sandbox, tried as a hostile tenant would: no environment, no other
//! templates, and a send whose template could run for ages is refused before it starts,
//! while the server keeps answering everyone else.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::dns::TestDns;
use crate::support::app::TestApp;
use crate::support::relay::verified_app;

fn first_error(r: &crate::support::app::Resp) -> (String, String, String) {
    let e = &r.json()["error"]["errors"][0];
    let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
    (s("field"), s("code"), s("message"))
}

#[test]
fn no_template_function_or_filter_reads_the_environment() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for text in [
        "{{ get_env(name=\"MAILROOM__ADMIN__TOKEN\") }}",
        "{{ get_env(name=\"MAILROOM__ADMIN__TOKEN\", default=\"x\") | upper }}",
        "{% for c in get_env(name=\"PATH\") %}{{ c }}{% endfor %}",
        "{{ \"MAILROOM__ADMIN__TOKEN\" | get_env }}",
        "{{ now() }}{{ get_random(end=9) }}",
    ] {
        for (subject, body) in [(text, "ok"), ("ok", text)] {
            let r = app.post(
                "/templates",
                &p.secret,
                json!({"name": "t", "subject": subject, "body": body}),
            );
            assert_eq!(r.status, 422, "{text}: {}", r.text);
            assert!(!r.text.contains("test-admin-token"), "{}", r.text);
            let (_, code, message) = first_error(&r);
            assert_eq!(code, "template_syntax", "{text}");
            assert!(message.contains("not available"), "{text}: {message}");
        }
    }
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "me@x.example", "subject": "{{ get_env(name=\"HOME\") }}", "body": "b"}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(app.get("/templates", &p.secret).json()["total"], 0);
}

#[test]
fn self_including_extending_and_macro_templates_are_refused_at_save_with_their_line() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    for (body, line) in [
        ("<p>hi</p>\n{% include \"body.html\" %}", 2),
        ("{% extends \"body.html\" %}", 1),
        ("{% import \"body.html\" as m %}", 1),
        (
            "a\nb\n{% macro r(n) %}{{ self::r(n=n) }}{% endmacro r %}{{ self::r(n=1) }}",
            3,
        ),
        ("{% set_global x = 1 %}", 1),
    ] {
        let r = app.post(
            "/templates",
            &p.secret,
            json!({"name": "t", "subject": "s", "body": body}),
        );
        assert_eq!(r.status, 422, "{body}: {}", r.text);
        let (field, code, message) = first_error(&r);
        assert_eq!(
            (field.as_str(), code.as_str()),
            ("body", "template_syntax"),
            "{body}"
        );
        assert!(
            message.contains(&format!("line {line}")),
            "{body}: {message}"
        );
    }
    let ok = app.post(
        "/templates",
        &p.secret,
        json!({"name": "t", "subject": "s", "body": "<p>{{ name }}</p>"}),
    );
    assert_eq!(ok.status, 201);
    let id = ok.json()["id"].as_str().unwrap().to_owned();
    let r = app.patch(
        &format!("/templates/{id}"),
        &p.secret,
        json!({"body": "{% include \"body.html\" %}"}),
    );
    assert_eq!(r.status, 422, "an update is checked too: {}", r.text);
    assert_eq!(
        app.get("/health", &p.secret).status,
        200,
        "the process is alive"
    );
}

#[test]
fn a_send_that_would_loop_a_trillion_times_is_refused_while_others_are_served() {
    let dns = TestDns::start();
    let (app, p) = verified_app(&dns, |s| s.limits.requests_per_minute = 0);
    let other = app.create_project("Other");
    let items: Vec<u32> = (0..10_000).collect();
    app.upsert(
        &p.secret,
        json!({"email": "big@example.com", "data": {"items": items}}),
    );
    // Harmless with no data, so it is saved; with this contact's data it is 10^12 steps.
    let loops = "{% for a in items %}{% for b in items %}{% for c in items %}.{% endfor %}{% endfor %}{% endfor %}";
    let t = app.post(
        "/templates",
        &p.secret,
        json!({"name": "loops", "subject": "s", "body": loops}),
    );
    assert_eq!(t.status, 201, "{}", t.text);
    let template = t.json()["id"].as_str().unwrap().to_owned();

    let started = Instant::now();
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "big@example.com", "from": "me@acme.test", "template": template}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let (field, code, message) = first_error(&r);
    assert_eq!((field.as_str(), code.as_str()), ("body", "too_big"));
    assert!(message.contains("with this data"), "{message}");

    // Many such sends at once leave /health and another project's writes prompt.
    let hostile: Vec<_> = (0..8)
        .map(|_| {
            let (base, key, template) = (app.base.clone(), p.secret.clone(), template.clone());
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let r = ureq::post(&format!("{base}/v1/send"))
                        .set("Authorization", &format!("Bearer {key}"))
                        .send_json(json!({"to": "big@example.com", "from": "me@acme.test", "template": template}));
                    assert!(matches!(r, Err(ureq::Error::Status(422, _))), "{r:?}");
                }
            })
        })
        .collect();
    for i in 0..20 {
        let started = Instant::now();
        assert_eq!(app.get("/health", &other.secret).status, 200);
        let r = app.post(
            "/contacts",
            &other.secret,
            json!({"email": format!("c{i}@example.com")}),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
    for h in hostile {
        h.join().unwrap();
    }
}

#[test]
fn a_template_that_grows_its_output_without_bound_is_refused_at_send() {
    let dns = TestDns::start();
    let (app, p) = verified_app(&dns, |_| {});
    let body = format!("{{{{ note{} }}}}", " | json_encode".repeat(6));
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "me@acme.test", "subject": "s", "body": body,
               "data": {"note": "\"".repeat(20_000)}}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let (field, code, message) = first_error(&r);
    assert_eq!((field.as_str(), code.as_str()), ("body", "too_big"));
    assert!(message.contains("bytes"), "{message}");
    let ok = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "a@example.com", "from": "me@acme.test", "subject": "s", "body": body, "data": {"note": "hi"}}),
    );
    assert_eq!(
        ok.status, 200,
        "the same template with small data is sent: {}",
        ok.text
    );
}
