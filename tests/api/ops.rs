//! /health, /metrics and /openapi.json need no key; the start-up summary, the log's
//! formats and the access log; a port in use.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{bin, test_config, TestApp};

/// The server's log (the harness sends its stderr to a file beside the data directory).
fn log_of(app: &TestApp) -> String {
    std::fs::read_to_string(app.data_dir.with_extension("log")).unwrap_or_default()
}

/// The log once `done` holds for it, or after `secs`.
fn log_when(app: &TestApp, secs: u64, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let log = log_of(app);
        if done(&log) || Instant::now() >= deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_start_up_summary_names_the_url_in_emails_and_the_first_command_without_colour_codes() {
    let app = TestApp::spawn_with(&[("MAILROOM__LOG__LEVEL", "info")]);
    let log = log_of(&app);
    let ready = log
        .lines()
        .find(|l| l.contains("mailroom ready"))
        .unwrap_or_else(|| panic!("a summary line: {log}"));
    assert!(
        ready.contains(&format!("links={}", app.base)),
        "the links follow the bound port: {ready}"
    );
    assert!(ready.contains("projects=0"), "{ready}");
    assert!(
        ready.contains(&format!("data_dir={}", app.data_dir.display())),
        "{ready}"
    );
    assert!(ready.contains("mail=file "), "{ready}");
    assert!(
        log.contains(r#"mailroom project create --name \"My app\""#),
        "{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "no escape codes when stderr is not a terminal: {log}"
    );
}

#[test]
fn log_format_json_writes_json_lines_and_the_access_log_keeps_keys_and_queries_out() {
    let app = TestApp::spawn_with(&[
        ("MAILROOM__LOG__LEVEL", "info"),
        ("MAILROOM__LOG__FORMAT", "json"),
        ("MAILROOM__LOG__ACCESS", "true"),
    ]);
    let p = app.create_project("Acme");
    let r = app.get("/contacts?limit=5&email=ada%40example.com", &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    let request_id = r.header("x-request-id").expect("a request id").to_owned();
    let log = log_when(&app, 20, |log| log.contains(&request_id));
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines
        .iter()
        .any(|l| l["fields"]["message"] == "mailroom ready"));
    let access = lines
        .iter()
        .find(|l| l["fields"]["request_id"] == request_id.as_str())
        .unwrap_or_else(|| panic!("an access line for {request_id}: {log}"));
    assert_eq!(access["target"], "mailroom::access");
    let f = &access["fields"];
    assert_eq!(
        (
            f["method"].as_str(),
            f["path"].as_str(),
            f["status"].as_u64()
        ),
        (Some("GET"), Some("/contacts"), Some(200)),
        "{access}"
    );
    assert!(f["ms"].as_f64().is_some(), "{access}");
    assert!(!log.contains(&p.secret) && !log.contains("Bearer"), "{log}");
    assert!(!log.contains("ada%40example.com"), "no query: {log}");
}

#[test]
fn the_access_log_is_off_by_default() {
    let app = TestApp::spawn_with(&[("MAILROOM__LOG__LEVEL", "info")]);
    let r = app.request("GET", "/health", None, None);
    let id = r.header("x-request-id").expect("a request id").to_owned();
    app.request("GET", "/health", None, None);
    assert!(!log_of(&app).contains(&id));
}

#[test]
fn a_public_url_that_does_not_answer_is_a_warning_and_does_not_hold_up_the_start() {
    let app = TestApp::spawn_with(&[
        // The discard port: nothing listens there.
        ("MAILROOM__SERVER__PUBLIC_URL", "http://127.0.0.1:9"),
        ("MAILROOM__SERVER__PUBLIC_URL_CHECK_MS", "1000"),
    ]);
    assert_eq!(app.request("GET", "/health", None, None).status, 200);
    let log = log_when(&app, 20, |log| log.contains("server.public_url does not"));
    let warning = log
        .lines()
        .find(|l| l.contains("server.public_url does not"))
        .unwrap_or_else(|| panic!("a warning about server.public_url: {log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("http://127.0.0.1:9/health"), "{warning}");
}

#[test]
fn a_port_in_use_exits_1_with_one_line_on_stderr_and_no_panic() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin())
        .args(["serve", "--port", &port, "--data-dir"])
        .arg(tmp.path().join("data"))
        .arg("--config")
        .arg(test_config())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailroom");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("a server on a port in use did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: port {port} on 127.0.0.1 is in use")),
        "{stderr}"
    );
    assert!(
        stderr.contains("--port") && stderr.contains("MAILROOM__SERVER__PORT"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(taken);
}

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
