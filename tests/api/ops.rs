//! /health, /metrics and /openapi.json need no key; the start-up summary, the log's
//! formats and the access log; a port in use. What /metrics tells an operator moves when
//! its event happens: a send, a bounce, a relay fault of each class, a wait in the
//! outbox, a workflow execution, a timer, a DNS lookup.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mailroom_testkit::Stage;
use serde_json::{json, Value};

use crate::support::app::{bin, test_config, Project, TestApp};
use crate::support::campaign::{advance, eventually, rig};
use crate::support::metrics::metric;
use crate::support::settings::LogFormat;

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
    let app = TestApp::spawn_with(|s| s.log.level = "info".into());
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
    let app = TestApp::spawn_with(|s| {
        s.log.level = "info".into();
        s.log.format = LogFormat::Json;
        s.log.access = true;
    });
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
    let app = TestApp::spawn_with(|s| s.log.level = "info".into());
    let r = app.request("GET", "/health", None, None);
    let id = r.header("x-request-id").expect("a request id").to_owned();
    app.request("GET", "/health", None, None);
    assert!(!log_of(&app).contains(&id));
}

#[test]
fn a_public_url_that_does_not_answer_is_a_warning_and_does_not_hold_up_the_start() {
    let app = TestApp::spawn_with(|s| {
        // The discard port: nothing listens there.
        s.server.public_url = "http://127.0.0.1:9".into();
        //127.0.0.1:9"),
        s.server.public_url_check_ms = 1000;
    });
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
fn health_answers_ok_with_the_version_backend_node_and_projects_owned_without_a_key() {
    let app = TestApp::spawn();
    let r = app.request("GET", "/health", None, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
    assert!(r.json()["version"].is_string());
    app.create_project("Acme");
    let h = app.request("GET", "/health", None, None).json();
    let backend = if crate::support::postgres::postgres_url().is_some() {
        "postgres"
    } else {
        "sled"
    };
    assert_eq!(h["backend"], backend, "{h}");
    assert!(h["nodeId"].as_str().is_some_and(|id| !id.is_empty()), "{h}");
    assert_eq!(h["liveNodes"], 1, "{h}");
    if backend == "sled" {
        assert_eq!(
            h["projectsOwned"], 1,
            "alone, the server owns every project: {h}"
        );
    }
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
    let app = TestApp::spawn_with(|s| s.metrics.enabled = false);
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

/// Waits (up to 30 s) until `series` reaches `at_least`; its last value.
fn metric_reaches(app: &TestApp, series: &str, at_least: f64) -> f64 {
    eventually(30, || metric(app, series), |v: &f64| *v >= at_least)
}

/// Sends one email from the rig's verified domain to `to`.
fn send_to(app: &TestApp, p: &Project, to: &str) {
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": "hello@acme.test", "subject": "Hi", "body": "Hi"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

const QUEUED: &str = "mailroom_emails_queued_total";
const SENT: &str = "mailroom_emails_sent_total";
const FAILED: &str = "mailroom_emails_failed_total";
const BOUNCED: &str = "mailroom_emails_bounced_total";

fn fault(class: &str) -> String {
    format!("mailroom_relay_faults_total{{class=\"{class}\"}}")
}

#[test]
fn metrics_count_emails_sent_bounced_and_failed_and_relay_faults_by_class() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.sending.max_attempts = 1;
        s.metrics.scan_interval_ms = 0;
    });
    let text = app.request("GET", "/metrics", None, None).text;
    for class in [
        "connect",
        "tls",
        "auth",
        "timeout",
        "refused_4xx",
        "refused_5xx",
        "other",
    ] {
        assert!(text.contains(&format!("{} 0", fault(class))), "{text}");
    }
    assert!(text.contains(&format!("{QUEUED} 0")), "{text}");

    send_to(&app, &p, "ok@example.com");
    assert_eq!(metric_reaches(&app, SENT, 1.0), 1.0);
    assert_eq!(metric(&app, QUEUED), 1.0);

    smtp.refuse(Stage::RcptTo, "550 5.1.1 No such user");
    send_to(&app, &p, "gone@example.com");
    assert_eq!(metric_reaches(&app, BOUNCED, 1.0), 1.0);
    assert_eq!(
        metric(&app, &fault("refused_5xx")),
        0.0,
        "the recipient's refusal is a bounce, not a relay fault"
    );

    smtp.refuse(Stage::MailFrom, "550 5.7.1 Sender rejected");
    send_to(&app, &p, "a@example.com");
    assert_eq!(metric_reaches(&app, &fault("refused_5xx"), 1.0), 1.0);
    assert_eq!(
        metric_reaches(&app, FAILED, 1.0),
        1.0,
        "one attempt allowed"
    );

    smtp.refuse(Stage::RcptTo, "451 4.3.0 Try again later");
    send_to(&app, &p, "b@example.com");
    assert_eq!(metric_reaches(&app, &fault("refused_4xx"), 1.0), 1.0);
    assert_eq!(metric_reaches(&app, FAILED, 2.0), 2.0);

    smtp.drop_connections(true);
    send_to(&app, &p, "c@example.com");
    assert_eq!(metric_reaches(&app, &fault("connect"), 1.0), 1.0);
    assert_eq!(metric_reaches(&app, FAILED, 3.0), 3.0);
    smtp.drop_connections(false);

    assert_eq!(
        (
            metric(&app, QUEUED),
            metric(&app, SENT),
            metric(&app, BOUNCED)
        ),
        (5.0, 1.0, 1.0)
    );
    assert_eq!(metric(&app, &fault("auth")), 0.0);
    assert_eq!(metric(&app, "mailroom_outbox_depth"), 0.0);
}

#[test]
fn metrics_show_the_outbox_depth_and_the_age_of_its_oldest_email_on_the_moved_clock() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.sending.max_attempts = 100;
        s.sending.retry_base_ms = 600000;
        s.metrics.scan_interval_ms = 0;
    });
    assert_eq!(metric(&app, "mailroom_outbox_depth"), 0.0);
    smtp.keep_refusing(Stage::RcptTo, "451 4.3.0 Try again later");
    send_to(&app, &p, "a@example.com");
    send_to(&app, &p, "b@example.com");
    assert_eq!(metric_reaches(&app, "mailroom_outbox_depth", 2.0), 2.0);
    assert_eq!(metric_reaches(&app, &fault("refused_4xx"), 2.0), 2.0);
    advance(&app, 120_000);
    let age = metric(&app, "mailroom_outbox_oldest_age_seconds");
    assert!(
        (120.0..600.0).contains(&age),
        "two minutes on the server's clock: {age}"
    );
    smtp.clear_refusals();
    advance(&app, 700_000);
    assert_eq!(metric_reaches(&app, SENT, 2.0), 2.0);
    let depth = eventually(
        30,
        || metric(&app, "mailroom_outbox_depth"),
        |d: &f64| *d == 0.0,
    );
    assert_eq!(depth, 0.0);
    assert_eq!(metric(&app, "mailroom_outbox_oldest_age_seconds"), 0.0);
}

#[test]
fn metrics_show_workflow_executions_timers_pending_and_dns_cache_hits() {
    let (dns, _smtp, app, p) = rig(|_| {});
    let r = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "Nudge", "enabled": true, "triggerEvent": "signup",
               "steps": [{"id": "wait", "type": "DELAY",
                          "config": {"amount": 1, "unit": "hours"}, "next": null}]}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let timers = metric(&app, "mailroom_timers_pending");
    let r = app.post(
        "/v1/track",
        &p.secret,
        json!({"email": "w@example.com", "event": "signup"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let started = r#"mailroom_workflow_executions_total{status="started"}"#;
    let completed = r#"mailroom_workflow_executions_total{status="completed"}"#;
    assert_eq!(metric_reaches(&app, started, 1.0), 1.0);
    assert_eq!(metric(&app, completed), 0.0);
    assert_eq!(
        metric_reaches(&app, "mailroom_timers_pending", timers + 1.0),
        timers + 1.0,
        "the DELAY's timer"
    );
    advance(&app, 3_600_001);
    assert_eq!(metric_reaches(&app, completed, 1.0), 1.0);
    let left = eventually(
        30,
        || metric(&app, "mailroom_timers_pending"),
        |t: &f64| *t == timers,
    );
    assert_eq!(left, timers, "the timer fired");

    dns.add_mail_domain("gmail.com");
    let verify = || {
        let r = app.post("/v1/verify", &p.secret, json!({"email": "ada@gmail.com"}));
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    };
    let first: Value = verify();
    assert_eq!(first["data"]["valid"], true, "{first}");
    assert_eq!(metric(&app, "mailroom_dns_cache_misses_total"), 1.0);
    assert_eq!(metric(&app, "mailroom_dns_cache_hits_total"), 0.0);
    verify();
    assert_eq!(metric(&app, "mailroom_dns_cache_hits_total"), 1.0);
    assert_eq!(metric(&app, "mailroom_dns_cache_misses_total"), 1.0);
}
