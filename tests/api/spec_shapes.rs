//! The specification's own request shapes, field for field: every field it names has its
//! effect, `audienceType` picks a campaign's audience, a near miss of a known field is
//! refused with the field it meant (instead of vanishing), and /v1/send's `type` takes
//! Markdown.

use base64::Engine;
use serde_json::{json, Value};

use crate::support::app::{Resp, TestApp};
use crate::support::campaign::{eventually, header_of, html_of, id, rig, wait};

const FROM: &str = "hello@acme.test";

/// The payload of a `{success: true, data}` answer with this status.
fn data(r: &Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.text);
    r.json()["data"].clone()
}

fn refused(r: &Resp) -> Vec<(String, String)> {
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.code(), "VALIDATION_ERROR");
    r.field_codes()
}

fn has(codes: &[(String, String)], field: &str, code: &str) -> bool {
    codes.contains(&(field.to_owned(), code.to_owned()))
}

#[test]
fn a_segment_campaign_created_with_audience_type_reaches_exactly_the_segment() {
    let (_dns, smtp, app, p) = rig(|_| {});
    for (email, plan) in [
        ("pro1@example.com", "pro"),
        ("pro2@example.com", "pro"),
        ("free1@example.com", "free"),
        ("free2@example.com", "free"),
    ] {
        app.upsert(&p.secret, json!({"email": email, "data": {"plan": plan}}));
    }
    // POST /segments as the specification shows it: name, filters, trackMembership.
    let segment = data(
        &app.post(
            "/segments",
            &p.secret,
            json!({"name": "Pro", "trackMembership": true, "filters": {"operator": "AND",
                   "conditions": [{"field": "data.plan", "operator": "equals", "value": "pro"}]}}),
        ),
        201,
    );
    let segment = if segment.is_null() {
        app.get("/segments", &p.secret).json()["segments"][0].clone()
    } else {
        segment
    };
    assert_eq!(segment["trackMembership"], true, "{segment}");
    assert_eq!(segment["memberCount"], 2, "{segment}");
    // POST /campaigns, every field of the specification's table.
    let c = data(
        &app.post(
            "/campaigns",
            &p.secret,
            json!({"name": "Pro news", "description": "for pro users", "subject": "News",
                   "body": "<p>Hello</p>", "from": FROM, "fromName": "Acme News",
                   "replyTo": "replies@acme.test", "audienceType": "SEGMENT",
                   "segmentId": segment["id"]}),
        ),
        201,
    );
    assert_eq!(c["type"], "SEGMENT", "{c}");
    assert_eq!(c["segmentId"], segment["id"]);
    assert_eq!(c["description"], "for pro users");
    assert_eq!(c["fromName"], "Acme News");
    assert_eq!(c["replyTo"], "replies@acme.test");
    let cid = id(&c);
    let r = app.post(&format!("/campaigns/{cid}/send"), &p.secret, json!({}));
    assert_eq!(r.status, 200, "{}", r.text);
    let sent = eventually(
        30,
        || data(&app.get(&format!("/campaigns/{cid}"), &p.secret), 200),
        |c| c["status"] == "SENT",
    );
    assert_eq!(sent["status"], "SENT", "{sent}");
    let got = smtp.wait_for(2, wait());
    let mut rcpts: Vec<String> = got.iter().flat_map(|m| m.rcpt_to.clone()).collect();
    rcpts.sort();
    assert_eq!(rcpts, ["pro1@example.com", "pro2@example.com"]);
    let m = got[0].text();
    assert!(header_of(&m, "From").unwrap().contains("Acme News"), "{m}");
    assert_eq!(
        header_of(&m, "Reply-To").as_deref(),
        Some("replies@acme.test")
    );
}

#[test]
fn audience_type_is_required_type_is_its_alias_and_the_two_must_agree() {
    let (_dns, _smtp, app, p) = rig(|_| {});
    let body = |extra: Value| {
        let mut b = json!({"name": "c", "subject": "s", "body": "<p>b</p>", "from": FROM});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let codes = refused(&app.post("/campaigns", &p.secret, body(json!({}))));
    assert!(has(&codes, "audienceType", "invalid_type"), "{codes:?}");
    let codes = refused(&app.post(
        "/campaigns",
        &p.secret,
        body(json!({"audienceType": "EVERYONE"})),
    ));
    assert!(
        has(&codes, "audienceType", "invalid_enum_value"),
        "{codes:?}"
    );
    let codes = refused(&app.post(
        "/campaigns",
        &p.secret,
        body(json!({"audienceType": "ALL", "type": "FILTERED"})),
    ));
    assert!(codes.iter().any(|(f, _)| f == "audienceType"), "{codes:?}");

    let both = data(
        &app.post(
            "/campaigns",
            &p.secret,
            body(json!({"audienceType": "ALL", "type": "ALL"})),
        ),
        201,
    );
    assert_eq!(both["type"], "ALL");
    let alias = data(
        &app.post("/campaigns", &p.secret, body(json!({"type": "ALL"}))),
        201,
    );
    assert_eq!(alias["type"], "ALL");

    // PATCH takes either name.
    let cid = id(&alias);
    let filter = json!({"operator": "AND", "conditions": [
        {"field": "data.plan", "operator": "equals", "value": "pro"}]});
    let patched = data(
        &app.patch(
            &format!("/campaigns/{cid}"),
            &p.secret,
            json!({"audienceType": "FILTERED", "audienceFilter": filter}),
        ),
        200,
    );
    assert_eq!(patched["type"], "FILTERED", "{patched}");
    let patched = data(
        &app.patch(
            &format!("/campaigns/{cid}"),
            &p.secret,
            json!({"type": "ALL"}),
        ),
        200,
    );
    assert_eq!(patched["type"], "ALL", "{patched}");
    let codes = refused(&app.patch(
        &format!("/campaigns/{cid}"),
        &p.secret,
        json!({"audienceType": "ALL", "type": "SEGMENT"}),
    ));
    assert!(codes.iter().any(|(f, _)| f == "audienceType"), "{codes:?}");

    // A segment on an ALL campaign would be ignored, and the campaign would mail
    // everyone: refused on create and on PATCH.
    let segment = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Few", "type": "STATIC"}),
    );
    assert_eq!(segment.status, 201, "{}", segment.text);
    let sid = segment.json()["id"].clone();
    let r = app.post(
        "/campaigns",
        &p.secret,
        body(json!({"audienceType": "ALL", "segmentId": sid})),
    );
    assert!(has(&refused(&r), "segmentId", "custom"), "{}", r.text);
    assert!(r.json()["error"]["suggestion"].is_string(), "{}", r.text);
    let r = app.patch(
        &format!("/campaigns/{cid}"),
        &p.secret,
        json!({"segmentId": sid}),
    );
    assert!(has(&refused(&r), "segmentId", "custom"), "{}", r.text);
    let patched = data(
        &app.patch(
            &format!("/campaigns/{cid}"),
            &p.secret,
            json!({"audienceType": "SEGMENT", "segmentId": sid}),
        ),
        200,
    );
    assert_eq!(
        (patched["type"].as_str(), &patched["segmentId"]),
        (Some("SEGMENT"), &sid)
    );
}

#[test]
fn a_near_miss_of_a_known_field_is_refused_with_the_field_it_meant() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(&p.secret, json!({"email": "ada@example.com"}));
    let path = format!("/contacts/{}", c["id"].as_str().unwrap());

    let r = app.patch(&path, &p.secret, json!({"subscibed": false}));
    let codes = refused(&r);
    assert_eq!(
        codes,
        [("subscibed".to_owned(), "unrecognized_keys".to_owned())]
    );
    let message = r.json()["error"]["errors"][0]["message"].clone();
    assert_eq!(
        message,
        "unknown field `subscibed`; did you mean `subscribed`?"
    );
    assert_eq!(
        app.get(&path, &p.secret).json()["subscribed"],
        true,
        "nothing changed"
    );

    let codes = refused(&app.post(
        "/contacts",
        &p.secret,
        json!({"email": "bo@example.com", "Data": {"plan": "pro"}}),
    ));
    assert!(has(&codes, "Data", "unrecognized_keys"), "{codes:?}");
    let codes = refused(&app.post(
        "/campaigns",
        &p.secret,
        json!({"name": "c", "subject": "s", "body": "b", "from": FROM,
               "audiencetype": "SEGMENT", "segmentID": "x"}),
    ));
    assert!(
        has(&codes, "audiencetype", "unrecognized_keys"),
        "{codes:?}"
    );
    assert!(has(&codes, "segmentID", "unrecognized_keys"), "{codes:?}");
    let codes = refused(&app.post(
        "/v1/track",
        &p.public,
        json!({"email": "bo@example.com", "evnt": "signup"}),
    ));
    assert!(has(&codes, "evnt", "unrecognized_keys"), "{codes:?}");
    let codes = refused(&app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "bo@example.com", "subjet": "s", "body": "b", "from": FROM}),
    ));
    assert!(has(&codes, "subjet", "unrecognized_keys"), "{codes:?}");

    // A field that resembles nothing known is still ignored, as Plunk's clients expect.
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "cy@example.com", "source": "landing-page"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
}

#[test]
fn every_field_of_the_specifications_send_track_verify_and_contact_shapes_has_its_effect() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let attachment = base64::engine::general_purpose::STANDARD.encode("hello, file");
    // POST /v1/send with every field of the specification's table.
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": {"name": "Ada", "email": "ada@example.com"}, "subject": "Hi {{plan}}",
               "body": "<p>Plan {{plan}}</p>", "from": {"name": "Acme", "email": FROM},
               "subscribed": true, "data": {"plan": "pro"}, "headers": {"X-Spec": "yes"},
               "reply": "help@acme.test",
               "attachments": [{"filename": "note.txt", "content": attachment,
                                "contentType": "text/plain"}]}),
    );
    let sent = data(&r, 200);
    assert_eq!(sent["emails"][0]["contact"]["email"], "ada@example.com");
    let got = smtp.wait_for(1, wait());
    let m = got[0].text();
    assert_eq!(header_of(&m, "Subject").as_deref(), Some("Hi pro"));
    assert!(header_of(&m, "From").unwrap().contains("Acme"), "{m}");
    assert_eq!(header_of(&m, "Reply-To").as_deref(), Some("help@acme.test"));
    assert_eq!(header_of(&m, "X-Spec").as_deref(), Some("yes"));
    assert!(
        m.contains("filename=\"note.txt\"") && m.contains("hello, file"),
        "{m}"
    );
    let ada = app.get("/contacts?search=ada@", &p.secret).json()["contacts"][0].clone();
    assert_eq!(ada["subscribed"], true, "`subscribed` applied: {ada}");

    // `name` instead of from.name.
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "bo@example.com", "subject": "s", "body": "b", "from": FROM,
               "name": "Acme Team"}),
    );
    data(&r, 200);
    let got = smtp.wait_for(2, wait());
    let m = got[1].text();
    assert!(header_of(&m, "From").unwrap().contains("Acme Team"), "{m}");

    // POST /v1/track: email, event, and the fields API.md adds (subscribed, data).
    let t = data(
        &app.post(
            "/v1/track",
            &p.secret,
            json!({"email": "cy@example.com", "event": "signup", "subscribed": false,
                   "data": {"source": "ad"}}),
        ),
        200,
    );
    assert!(t["contact"].is_string() && t["event"].is_string(), "{t}");
    let cy = app.get("/contacts?search=cy@", &p.secret).json()["contacts"][0].clone();
    assert_eq!(
        (cy["subscribed"].clone(), cy["data"]["source"].clone()),
        (json!(false), json!("ad"))
    );

    // POST /v1/verify: email.
    let v = app.post("/v1/verify", &p.secret, json!({"email": "dee@example.com"}));
    assert_eq!(v.status, 200, "{}", v.text);
    assert_eq!(v.json()["success"], true);

    // POST /contacts: email, subscribed, data; PATCH: subscribed, data.
    let r = app.post(
        "/contacts",
        &p.secret,
        json!({"email": "eve@example.com", "subscribed": false, "data": {"plan": "free"}}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let eve = r.json();
    assert_eq!(
        (eve["subscribed"].clone(), eve["data"]["plan"].clone()),
        (json!(false), json!("free"))
    );
    let r = app.patch(
        &format!("/contacts/{}", eve["id"].as_str().unwrap()),
        &p.secret,
        json!({"subscribed": true, "data": {"plan": "pro"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (
            r.json()["subscribed"].clone(),
            r.json()["data"]["plan"].clone()
        ),
        (json!(true), json!("pro"))
    );

    // POST /templates with every field the contract names.
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"name": "Welcome", "subject": "Welcome", "body": "<p>Hi</p>", "type": "MARKETING",
               "from": FROM, "fromName": "Acme", "replyTo": "help@acme.test",
               "description": "the first email"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let t = r.json();
    let t = if t["data"].is_object() {
        t["data"].clone()
    } else {
        t
    };
    for (field, want) in [
        ("type", "MARKETING"),
        ("from", FROM),
        ("fromName", "Acme"),
        ("replyTo", "help@acme.test"),
        ("description", "the first email"),
    ] {
        assert_eq!(t[field], want, "{field}: {t}");
    }
}

#[test]
fn a_markdown_body_is_sent_as_html_and_other_body_types_are_refused() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "s", "type": "markdown",
               "body": "# Hello {{name ?? \"there\"}}\n\nThis is **bold**.",
               "data": {"name": "Ada"}}),
    );
    data(&r, 200);
    let got = smtp.wait_for(1, wait());
    let html = html_of(&got[0].text());
    assert!(html.contains("<h1>Hello Ada</h1>"), "{html}");
    assert!(html.contains("<strong>bold</strong>"), "{html}");

    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "s", "type": "html",
               "body": "<p>**not markdown**</p>"}),
    );
    data(&r, 200);
    let got = smtp.wait_for(2, wait());
    assert!(html_of(&got[1].text()).contains("**not markdown**"));

    let codes = refused(&app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "s", "type": "text",
               "body": "b"}),
    ));
    assert!(has(&codes, "type", "invalid_enum_value"), "{codes:?}");
}
