//! Isolation sweep: project B's key against every one of project A's ids answers exactly
//! as it does for an id that never existed (same status, same code, same body shape),
//! and A's records stay as they were.

use serde_json::{json, Value};

use crate::support::app::{Resp, TestApp, ADMIN_TOKEN};

/// An answer with what differs between any two requests taken out.
fn shape(r: &Resp) -> (u16, Value) {
    let mut v: Value = serde_json::from_str(&r.text).unwrap_or(Value::Null);
    if let Some(error) = v.get_mut("error").and_then(Value::as_object_mut) {
        error.remove("requestId");
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("timestamp");
    }
    (r.status, v)
}

/// An id of the same kind that no project has: `id` with its last digit changed.
fn fresh(id: &str) -> String {
    let mut chars: Vec<char> = id.chars().collect();
    let last = chars.len() - 1;
    chars[last] = if chars[last] == '0' { '1' } else { '0' };
    chars.into_iter().collect()
}

/// Each request with `key` (another project's) against its path's id, and against a
/// fresh id in its place: a 404 either way, alike but for the message when
/// `but_message` (it may name the id asked for).
fn sweep(app: &TestApp, key: &str, requests: &[(&str, String, Option<Value>)], but_message: bool) {
    for (method, path, body) in requests {
        // The first segment that is an id (has a digit): `/contacts/imports/<id>` too.
        let id = path
            .split('/')
            .skip(2)
            .find(|seg| seg.chars().any(|c| c.is_ascii_digit()))
            .unwrap_or_else(|| panic!("{path}: no id in it"));
        let other = path.replacen(id, &fresh(id), 1);
        let send = |p: &str| {
            let text = body.as_ref().map(Value::to_string);
            app.request(method, p, Some(key), text.as_deref())
        };
        let (theirs, never) = (send(path), send(&other));
        assert_eq!(theirs.status, 404, "{method} {path}: {}", theirs.text);
        let (mut t, mut n) = (shape(&theirs), shape(&never));
        if but_message {
            for v in [&mut t.1, &mut n.1] {
                if let Some(e) = v.get_mut("error").and_then(Value::as_object_mut) {
                    e.remove("message");
                }
                if let Some(o) = v.as_object_mut() {
                    o.remove("message");
                }
            }
        }
        assert_eq!(t, n, "{method} {path} tells A's record from none");
    }
}

#[test]
fn project_b_cannot_tell_project_as_ids_from_ids_that_never_existed() {
    let app = TestApp::spawn();
    let a = app.create_project("A");
    let b = app.create_project("B");
    let contact = app.upsert(
        &a.secret,
        json!({"email": "ada@example.com", "data": {"k": 1}}),
    );
    let contact = contact["id"].as_str().unwrap().to_owned();
    let template = app.post(
        "/templates",
        &a.secret,
        json!({"name": "t", "subject": "s", "body": "b"}),
    );
    let template = template.json()["id"].as_str().unwrap().to_owned();
    let segment = app.post(
        "/segments",
        &a.secret,
        json!({"name": "s", "type": "STATIC"}),
    );
    let segment = segment.json()["id"].as_str().unwrap().to_owned();
    let domain = app.post("/domains", &a.secret, json!({"domain": "a.example"}));
    let domain = domain.json()["id"].as_str().unwrap().to_owned();
    let event = app.post(
        "/v1/track",
        &a.secret,
        json!({"email": "ada@example.com", "event": "e"}),
    );
    assert_eq!(event.status, 200);
    let event = app.get("/events", &a.secret).json()["events"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let requests: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/contacts/{contact}"), None),
        (
            "PATCH",
            format!("/contacts/{contact}"),
            Some(json!({"data": {"x": 1}})),
        ),
        ("DELETE", format!("/contacts/{contact}"), None),
        ("GET", format!("/templates/{template}"), None),
        (
            "PATCH",
            format!("/templates/{template}"),
            Some(json!({"name": "x"})),
        ),
        ("DELETE", format!("/templates/{template}"), None),
        ("GET", format!("/segments/{segment}"), None),
        (
            "PATCH",
            format!("/segments/{segment}"),
            Some(json!({"name": "x"})),
        ),
        ("DELETE", format!("/segments/{segment}"), None),
        ("GET", format!("/segments/{segment}/contacts"), None),
        (
            "POST",
            format!("/segments/{segment}/members"),
            Some(json!({"emails": ["ada@example.com"]})),
        ),
        ("GET", format!("/domains/{domain}"), None),
        ("POST", format!("/domains/{domain}/verify"), Some(json!({}))),
        ("DELETE", format!("/domains/{domain}"), None),
        ("GET", format!("/events/{event}"), None),
    ];
    // The message may name the id that was asked for; everything else must match.
    sweep(&app, &b.secret, &requests, true);
    // /v1/send with A's template answers like an unknown template.
    let send = |t: &str| {
        app.post(
            "/v1/send",
            &b.secret,
            json!({"to": "x@example.com", "from": "me@b.example", "template": t}),
        )
    };
    let (theirs, never) = (send(&template), send(&fresh(&template)));
    assert_eq!((theirs.status, theirs.code()), (never.status, never.code()));
    assert_eq!(theirs.code(), "TEMPLATE_NOT_FOUND");
    // Filters by A's contact find nothing, as for a contact that does not exist.
    let listed = app.get(&format!("/events?contactId={contact}"), &b.secret);
    let none = app.get(&format!("/events?contactId={}", fresh(&contact)), &b.secret);
    assert_eq!(shape(&listed), shape(&none));
    // And A's records are untouched.
    let still = app.get(&format!("/contacts/{contact}"), &a.secret).json();
    assert_eq!(still["data"], json!({"k": 1}));
    assert_eq!(
        app.get(&format!("/templates/{template}"), &a.secret).status,
        200
    );
    assert_eq!(
        app.get(&format!("/segments/{segment}"), &a.secret).status,
        200
    );
    assert_eq!(
        app.get(&format!("/domains/{domain}"), &a.secret).status,
        200
    );
}

#[test]
fn project_b_cannot_tell_project_as_campaigns_workflows_and_executions_from_ids_that_never_existed()
{
    let app = TestApp::spawn();
    let a = app.create_project("A");
    let b = app.create_project("B");
    for p in [&a, &b] {
        let path = format!("/admin/projects/{}/domains/trust", p.id);
        let r = app.post(&path, ADMIN_TOKEN, json!({"domain": "acme.test"}));
        assert_eq!(r.status, 200, "{}", r.text);
    }
    app.upsert(
        &a.secret,
        json!({"email": "ada@example.com", "subscribed": true}),
    );
    let id_of = |r: &Resp| -> String {
        let v = r.json();
        v["data"]["id"]
            .as_str()
            .or(v["id"].as_str())
            .unwrap_or_else(|| panic!("an id: {}", r.text))
            .to_owned()
    };
    let campaign = id_of(&app.post(
        "/campaigns",
        &a.secret,
        json!({"name": "c", "subject": "s", "body": "b", "from": "hi@acme.test",
               "audienceType": "ALL"}),
    ));
    let segment = id_of(&app.post(
        "/segments",
        &a.secret,
        json!({"name": "s", "type": "STATIC"}),
    ));
    let template = id_of(&app.post(
        "/templates",
        &a.secret,
        json!({"name": "t", "subject": "s", "body": "b", "from": "hi@acme.test"}),
    ));
    let workflow = id_of(&app.post(
        "/workflows",
        &a.secret,
        json!({"name": "w", "triggerEvent": "go", "enabled": true,
               "steps": [{"id": "wait", "type": "DELAY", "config": {"amount": 1, "unit": "days"}}]}),
    ));
    app.post(
        "/v1/track",
        &a.secret,
        json!({"email": "ada@example.com", "event": "go"}),
    );
    let execution = app
        .get(&format!("/workflows/{workflow}/executions"), &a.secret)
        .json()["executions"][0]["id"]
        .as_str()
        .expect("an execution")
        .to_owned();
    let requests: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/campaigns/{campaign}"), None),
        (
            "PATCH",
            format!("/campaigns/{campaign}"),
            Some(json!({"name": "x"})),
        ),
        ("DELETE", format!("/campaigns/{campaign}"), None),
        (
            "POST",
            format!("/campaigns/{campaign}/send"),
            Some(json!({})),
        ),
        ("POST", format!("/campaigns/{campaign}/cancel"), None),
        (
            "POST",
            format!("/campaigns/{campaign}/test"),
            Some(json!({"email": "b@example.com"})),
        ),
        ("GET", format!("/campaigns/{campaign}/stats"), None),
        ("GET", format!("/workflows/{workflow}"), None),
        (
            "PATCH",
            format!("/workflows/{workflow}"),
            Some(json!({"enabled": false})),
        ),
        ("DELETE", format!("/workflows/{workflow}"), None),
        ("GET", format!("/workflows/{workflow}/executions"), None),
        (
            "GET",
            format!("/workflows/{workflow}/executions/{execution}"),
            None,
        ),
    ];
    sweep(&app, &b.secret, &requests, false);
    // Ids of A's records named in B's bodies are unknown ids.
    let with_segment = |s: &str| {
        app.post(
            "/campaigns",
            &b.secret,
            json!({"name": "c", "subject": "s", "body": "b", "from": "hi@acme.test",
                   "type": "SEGMENT", "segmentId": s}),
        )
    };
    let (theirs, never) = (with_segment(&segment), with_segment(&fresh(&segment)));
    assert_eq!((theirs.status, theirs.code()), (never.status, never.code()));
    assert_eq!(theirs.code(), "SEGMENT_NOT_FOUND");
    let with_template = |t: &str| {
        app.post(
            "/workflows",
            &b.secret,
            json!({"name": "w", "triggerEvent": "go",
                   "steps": [{"id": "s", "type": "SEND_EMAIL", "config": {"templateId": t}}]}),
        )
    };
    let (theirs, never) = (with_template(&template), with_template(&fresh(&template)));
    assert_eq!((theirs.status, theirs.code()), (never.status, never.code()));
    assert_eq!(theirs.code(), "TEMPLATE_NOT_FOUND");
    // A's records are as they were.
    let c = app.get(&format!("/campaigns/{campaign}"), &a.secret).json();
    assert_eq!(
        (c["data"]["name"].as_str(), c["data"]["status"].as_str()),
        (Some("c"), Some("DRAFT"))
    );
    let w = app.get(&format!("/workflows/{workflow}"), &a.secret).json();
    assert_eq!(w["enabled"], true, "{w}");
}

/// A body that passes each route's own checks, so that the answer is about the id.
fn body_for(method: &str, template: &str) -> Option<Value> {
    Some(match (method, template) {
        ("DELETE", "/segments/{id}/members") => json!({"emails": ["ada@example.com"]}),
        ("GET" | "DELETE", _) => return None,
        ("PATCH", "/contacts/{id}") => json!({"data": {"x": 1}}),
        ("PATCH", "/templates/{id}" | "/segments/{id}" | "/campaigns/{id}") => {
            json!({"name": "x"})
        }
        ("PATCH", "/workflows/{id}" | "/webhooks/{id}") => json!({"enabled": false}),
        ("POST", "/segments/{id}/members") => json!({"emails": ["ada@example.com"]}),
        ("POST", "/campaigns/{id}/test") => json!({"email": "b@example.com"}),
        _ => json!({}),
    })
}

#[test]
fn every_path_of_the_openapi_document_that_names_an_id_answers_project_b_as_for_no_record() {
    let app = TestApp::spawn();
    let a = app.create_project("A");
    let b = app.create_project("B");
    for p in [&a, &b] {
        let path = format!("/admin/projects/{}/domains/trust", p.id);
        let r = app.post(&path, ADMIN_TOKEN, json!({"domain": "acme.test"}));
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let id_of = |r: &Resp| -> String {
        let v = r.json();
        v["data"]["id"]
            .as_str()
            .or(v["id"].as_str())
            .unwrap_or_else(|| panic!("an id: {}", r.text))
            .to_owned()
    };
    // One record of every kind a path can name, all A's.
    let contact = app.upsert(
        &a.secret,
        json!({"email": "ada@example.com", "subscribed": true}),
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let template = id_of(&app.post(
        "/templates",
        &a.secret,
        json!({"name": "t", "subject": "s", "body": "b", "from": "hi@acme.test"}),
    ));
    let segment = id_of(&app.post(
        "/segments",
        &a.secret,
        json!({"name": "s", "type": "STATIC"}),
    ));
    let domain = id_of(&app.post("/domains", &a.secret, json!({"domain": "a.example"})));
    let campaign = id_of(&app.post(
        "/campaigns",
        &a.secret,
        json!({"name": "c", "subject": "s", "body": "b", "from": "hi@acme.test",
               "audienceType": "ALL"}),
    ));
    let workflow = id_of(&app.post(
        "/workflows",
        &a.secret,
        json!({"name": "w", "triggerEvent": "go", "enabled": true,
               "steps": [{"id": "wait", "type": "DELAY", "config": {"amount": 1, "unit": "days"}}]}),
    ));
    let tracked = app.post(
        "/v1/track",
        &a.secret,
        json!({"email": "ada@example.com", "event": "go"}),
    );
    assert_eq!(tracked.status, 200, "{}", tracked.text);
    let event = app.get("/events?limit=1", &a.secret).json()["events"][0]["id"]
        .as_str()
        .expect("an event")
        .to_owned();
    let execution = app
        .get(&format!("/workflows/{workflow}/executions"), &a.secret)
        .json()["executions"][0]["id"]
        .as_str()
        .expect("an execution")
        .to_owned();
    let sent = app.post(
        "/v1/send",
        &a.secret,
        json!({"to": "ada@example.com", "from": "hi@acme.test", "subject": "s", "body": "b"}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    let email = sent.json()["data"]["emails"][0]["email"]
        .as_str()
        .expect("an email id")
        .to_owned();
    let webhook = id_of(&app.post(
        "/webhooks",
        &a.secret,
        json!({"url": "https://example.com/hook", "events": ["*"]}),
    ));
    let suppressed = app.post(
        "/suppressions",
        &a.secret,
        json!({"email": "gone1@example.com"}),
    );
    assert_eq!(suppressed.status, 201, "{}", suppressed.text);
    // The sweep finds the path's id by its digit.
    let suppression = "gone1@example.com".to_owned();
    let import = crate::support::imports::import(&app, &a.secret, "email\nbea@example.com\n");
    crate::support::imports::finished(&app, &a.secret, &import);

    let doc = app.request("GET", "/openapi.json", None, None).json();
    let paths = doc["paths"].as_object().expect("paths");
    let mut requests: Vec<(String, String, Option<Value>)> = Vec::new();
    for (pattern, methods) in paths {
        if !pattern.contains('{') || pattern.starts_with("/admin") {
            continue;
        }
        let id = match pattern.split('/').nth(1) {
            _ if pattern.starts_with("/contacts/imports/") => &import,
            Some("contacts") => &contact,
            Some("templates") => &template,
            Some("segments") => &segment,
            Some("domains") => &domain,
            Some("campaigns") => &campaign,
            Some("workflows") => &workflow,
            Some("events") => &event,
            Some("emails") => &email,
            Some("webhooks") => &webhook,
            Some("suppressions") => &suppression,
            other => panic!(
                "{pattern}: no record of this kind in the sweep ({other:?}); add one, so that \
                 B's key is tried against A's"
            ),
        };
        let path = pattern
            .replace("{id}", id)
            .replace("{email}", id)
            .replace("{executionId}", &execution);
        assert!(
            !path.contains('{'),
            "{pattern}: a parameter the sweep does not fill"
        );
        for method in methods.as_object().expect("methods").keys() {
            let method = method.to_uppercase();
            let body = body_for(&method, pattern);
            requests.push((method, path.clone(), body));
        }
    }
    assert!(requests.len() >= 20, "the document's paths: {requests:?}");
    let borrowed: Vec<(&str, String, Option<Value>)> = requests
        .iter()
        .map(|(m, p, b)| (m.as_str(), p.clone(), b.clone()))
        .collect();
    // The message may name the id asked for; everything else must match.
    sweep(&app, &b.secret, &borrowed, true);
    // And the records are A's still.
    for path in [
        format!("/contacts/{contact}"),
        format!("/templates/{template}"),
        format!("/emails/{email}"),
        format!("/contacts/imports/{import}"),
        format!("/webhooks/{webhook}"),
        format!("/workflows/{workflow}/executions/{execution}"),
    ] {
        assert_eq!(app.get(&path, &a.secret).status, 200, "{path}");
    }
    assert_eq!(
        app.get("/suppressions", &a.secret).json()["total"],
        1,
        "B's DELETE left A's suppression"
    );
}
