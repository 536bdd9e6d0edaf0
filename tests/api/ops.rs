//! /health, /metrics and /openapi.json need no key.

use serde_json::json;

use crate::helpers::TestApp;

#[test]
fn health_answers_ok_with_the_version_without_a_key() {
    let app = TestApp::spawn();
    let r = app.request("GET", "/health", None, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
    assert!(r.json()["version"].is_string());
}

#[test]
fn metrics_count_requests_by_route_and_status_and_show_mailbox_depths() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(&p.secret, json!({"email": "a@example.com"}));
    app.get("/contacts/nope", &p.secret);
    let text = app.request("GET", "/metrics", None, None).text;
    assert!(
        text.contains(
            r#"mailroom_http_requests_total{method="POST",route="/contacts",status="201"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"route="/contacts/{id}",status="404""#),
        "{text}"
    );
    assert!(text.contains("mailroom_http_request_duration_seconds_bucket"));
    assert!(
        text.contains(r#"mailroom_mailbox_depth{actor="project",stat="actors"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mailroom_mailbox_depth{actor="project",stat="max"} 0"#),
        "{text}"
    );
    assert!(!text.contains(&p.id), "no project ids in metrics: {text}");
}

#[test]
fn fifty_unknown_methods_leave_metrics_as_they_were() {
    let app = TestApp::spawn();
    let series = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("mailroom_http_requests_total"))
            .count()
    };
    app.request("FROB0", "/health", None, None);
    let before = app.request("GET", "/metrics", None, None).text;
    for i in 1..=50 {
        let r = app.request(&format!("FROB{i}"), "/health", None, None);
        assert_eq!(r.status, 405, "{}", r.text);
    }
    let after = app.request("GET", "/metrics", None, None).text;
    assert_eq!(
        series(&before) + 1,
        series(&after),
        "only GET /metrics was added: {after}"
    );
    assert!(
        after.contains(r#"method="OTHER",route="/health",status="405"} 51"#),
        "{after}"
    );
    assert!(!after.contains("FROB"), "{after}");
}

#[test]
fn metrics_can_be_disabled() {
    let app = TestApp::spawn_with(&[("MAILROOM__METRICS__ENABLED", "false")]);
    assert_eq!(app.request("GET", "/metrics", None, None).status, 404);
}

#[test]
fn openapi_json_describes_the_contact_endpoints() {
    let app = TestApp::spawn();
    let doc = app.request("GET", "/openapi.json", None, None).json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for (path, method) in [
        ("/contacts", "get"),
        ("/contacts", "post"),
        ("/contacts/{id}", "patch"),
        ("/contacts/{id}", "delete"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
    assert!(doc["components"]["schemas"]["ContactView"].is_object());
}

#[test]
fn openapi_json_declares_every_path_parameter_and_the_errors_each_keyed_operation_answers() {
    let app = TestApp::spawn();
    let doc = app.request("GET", "/openapi.json", None, None).json();
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.contains_key("/campaigns/{id}/send") && paths.contains_key("/workflows/{id}"));
    for (path, item) in paths {
        let names: Vec<&str> = path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split('}').next())
            .collect();
        for (method, op) in item.as_object().expect("a path item") {
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            for name in &names {
                assert!(
                    params
                        .iter()
                        .any(|p| p["name"] == *name && p["in"] == "path"),
                    "{method} {path} declares {name}"
                );
            }
            if op.get("security").is_some() {
                for status in ["401", "404", "422", "429", "500"] {
                    assert!(
                        op["responses"].get(status).is_some(),
                        "{method} {path} lists {status}"
                    );
                }
            }
        }
    }
    let limit = doc["paths"]["/contacts"]["get"]["parameters"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "limit").cloned())
        .expect("limit");
    assert_eq!(
        (&limit["schema"]["minimum"], &limit["schema"]["maximum"]),
        (&json!(1), &json!(100))
    );
}

#[test]
fn openapi_json_request_bodies_carry_the_bounds_and_grammars_the_server_checks() {
    let app = TestApp::spawn();
    let doc = app.request("GET", "/openapi.json", None, None).json();
    let schemas = &doc["components"]["schemas"];
    let create = &schemas["CreateTemplateRequest"];
    let required: Vec<&str> = create["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(required, ["name", "subject", "body"]);
    assert_eq!(schemas["Text200"]["maxLength"], 200);
    assert_eq!(schemas["EmailAddress"]["format"], "email");
    assert_eq!(
        schemas["MembersRequest"]["properties"]["emails"]["$ref"],
        "#/components/schemas/EmailAddressList1To1000"
    );
    assert_eq!(schemas["EmailAddressList1To1000"]["minItems"], 1);
    // The grammars are written next to their parsers and served as written.
    let group = &schemas["FilterGroup"];
    assert_eq!(
        group["properties"]["operator"]["enum"],
        json!(["AND", "OR"])
    );
    let item = &group["properties"]["conditions"]["items"]["anyOf"];
    assert_eq!(item[0]["$ref"], "#/components/schemas/FilterGroup");
    assert!(item[1]["anyOf"].as_array().is_some_and(|b| b.len() > 10));
    assert_eq!(schemas["WorkflowSteps"]["maxItems"], 100);
    assert!(schemas["Recipients"]["anyOf"].is_array());
    let send = &schemas["SendRequest"];
    assert_eq!(
        send["properties"]["to"]["$ref"],
        "#/components/schemas/Recipients"
    );
    assert!(send["required"]
        .as_array()
        .is_some_and(|r| r.contains(&json!("to"))));
}

#[test]
fn a_method_a_path_does_not_take_answers_405_with_the_allowed_methods() {
    let app = TestApp::spawn();
    let r = app.request("PUT", "/campaigns", None, None);
    assert_eq!(r.status, 405, "{}", r.text);
    let allow = r.header("allow").unwrap_or_default().to_owned();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
}
