//! Workflows (API.md section 10): the CRUD of a workflow and the validation of its step
//! graph, triggers (API and system events, enabled or not, with and without re-entry),
//! DELAY and WAIT_FOR_EVENT on the moved clock, CONDITION branches, UPDATE_CONTACT and
//! the segment entry it causes, WEBHOOK steps against a real HTTP server on loopback (and
//! the refusal of private addresses), a failing step beside executions that go on, the
//! cancellation by DELETE, and `kill -9` during a DELAY. Mail goes through a real SMTP
//! server on loopback.

use std::net::TcpListener;

use mailroom_testkit::{HookServer, Received, SmtpServer};
use serde_json::{json, Value};

use crate::support::app::{Project, Resp, TestApp};
use crate::support::campaign::{advance, control, email_id_of, eventually, header_of, id, rig};

/// A sender on the rig's verified domain.
const FROM: &str = "hello@acme.test";

/// A well-formed id that no record has.
const MISSING_ID: &str = "01a20f54-f3c0-75ee-88c4-81dc155616f1";

const SECOND_MS: i64 = 1_000;
const HOUR_MS: i64 = 3_600 * SECOND_MS;
const DAY_MS: i64 = 24 * HOUR_MS;

/// Whether the message went to `to` with this subject.
fn is_mail(m: &Received, to: &str, subject: &str) -> bool {
    m.rcpt_to.iter().any(|r| r == to) && header_of(&m.text(), "Subject").as_deref() == Some(subject)
}

/// How many messages to `to` with this subject the relay has accepted.
fn mails(smtp: &SmtpServer, to: &str, subject: &str) -> usize {
    smtp.received()
        .iter()
        .filter(|m| is_mail(m, to, subject))
        .count()
}

/// Waits (up to 30 s) for a message to `to` with this subject; its place in the order of
/// arrival at the relay.
fn wait_mail(smtp: &SmtpServer, to: &str, subject: &str) -> usize {
    let got = eventually(
        30,
        || smtp.received(),
        |got: &Vec<Received>| got.iter().any(|m| is_mail(m, to, subject)),
    );
    got.iter()
        .position(|m| is_mail(m, to, subject))
        .unwrap_or_else(|| panic!("no email \"{subject}\" reached {to}"))
}

/// A TRANSACTIONAL template from the verified domain whose subject is `subject`; its id.
fn template(app: &TestApp, p: &Project, name: &str, subject: &str) -> String {
    let r = app.post(
        "/templates",
        &p.secret,
        json!({"name": name, "subject": subject, "body": format!("<p>{subject}</p>"),
               "type": "TRANSACTIONAL", "from": FROM}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    id(&r.json())
}

/// Creates a workflow; its record.
fn create_workflow(app: &TestApp, p: &Project, body: Value) -> Value {
    let r = app.post("/workflows", &p.secret, body);
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

/// Creates an enabled workflow on `trigger` with these steps; its id.
fn enabled_workflow(
    app: &TestApp,
    p: &Project,
    name: &str,
    trigger: &str,
    allow_reentry: bool,
    steps: Value,
) -> String {
    let w = create_workflow(
        app,
        p,
        json!({"name": name, "enabled": true, "triggerEvent": trigger,
               "allowReentry": allow_reentry, "steps": steps}),
    );
    assert_eq!(w["enabled"], true, "{w}");
    id(&w)
}

/// A workflow of one EXIT step on `trigger`, re-entry allowed: each trigger it sees ends
/// in an EXITED execution, which tells a test that the trigger was handled.
fn witness(app: &TestApp, p: &Project, trigger: &str) -> String {
    enabled_workflow(
        app,
        p,
        "Witness",
        trigger,
        true,
        json!([{"id": "end", "type": "EXIT", "config": {}, "next": null}]),
    )
}

/// POST /v1/track with this body; the contact's id.
fn track_with(app: &TestApp, p: &Project, body: Value) -> String {
    let r = app.post("/v1/track", &p.secret, body);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["data"]["contact"]
        .as_str()
        .unwrap_or_else(|| panic!("a contact id: {}", r.text))
        .to_owned()
}

/// Tracks `event` for `email`; the contact's id.
fn track(app: &TestApp, p: &Project, email: &str, event: &str) -> String {
    track_with(app, p, json!({"email": email, "event": event}))
}

/// GET /workflows/{wid}/executions?{query}: the list object.
fn executions(app: &TestApp, p: &Project, wid: &str, query: &str) -> Value {
    let r = app.get(&format!("/workflows/{wid}/executions?{query}"), &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// The executions of the workflow for this contact, newest first.
fn executions_of(app: &TestApp, p: &Project, wid: &str, contact: &str) -> Vec<Value> {
    executions(app, p, wid, "limit=100")["executions"]
        .as_array()
        .expect("an executions array")
        .iter()
        .filter(|e| e["contactId"] == contact)
        .cloned()
        .collect()
}

/// GET /workflows/{wid}/executions/{eid}: the execution with its history.
fn execution(app: &TestApp, p: &Project, wid: &str, eid: &str) -> Value {
    let r = app.get(&format!("/workflows/{wid}/executions/{eid}"), &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// Polls (up to 30 s) until the contact's newest execution of the workflow has this
/// status; that execution, read by its id (null if it never started).
fn execution_when(app: &TestApp, p: &Project, wid: &str, contact: &str, status: &str) -> Value {
    let e = eventually(
        30,
        || match executions_of(app, p, wid, contact).first() {
            Some(e) => execution(app, p, wid, &id(e)),
            None => Value::Null,
        },
        |e: &Value| e["status"] == status,
    );
    assert_eq!(
        e["status"], status,
        "the contact's execution of {wid} is {status}: {e}"
    );
    e
}

/// Waits until the witness workflow has `n` executions for the contact, all EXITED: the
/// contact's `n`th trigger has been handled.
fn witnessed(app: &TestApp, p: &Project, witness: &str, contact: &str, n: usize) {
    let got = eventually(
        30,
        || executions_of(app, p, witness, contact),
        |list: &Vec<Value>| list.len() >= n && list.iter().all(|e| e["status"] == "EXITED"),
    );
    assert!(
        got.len() == n && got.iter().all(|e| e["status"] == "EXITED"),
        "the witness saw {n} triggers: {got:?}"
    );
}

/// (stepId, type, status) of each history entry.
fn trail(e: &Value) -> Vec<(String, String, String)> {
    e["history"]
        .as_array()
        .unwrap_or_else(|| panic!("an execution with a history: {e}"))
        .iter()
        .map(|h| {
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            (text("stepId"), text("type"), text("status"))
        })
        .collect()
}

fn tuples(want: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    want.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

/// The (first) history entry of a step.
fn entry<'a>(e: &'a Value, step: &str) -> &'a Value {
    e["history"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["stepId"] == step))
        .unwrap_or_else(|| panic!("a history entry for {step}: {e}"))
}

/// A SEND_EMAIL step.
fn send_step(step: &str, template: &str, next: Value) -> Value {
    json!({"id": step, "type": "SEND_EMAIL", "config": {"templateId": template}, "next": next})
}

/// A DELAY step.
fn delay_step(step: &str, amount: i64, unit: &str, next: Value) -> Value {
    json!({"id": step, "type": "DELAY", "config": {"amount": amount, "unit": unit}, "next": next})
}

/// The number of events that match the query.
fn event_count(app: &TestApp, p: &Project, query: &str) -> u64 {
    let r = app.get(&format!("/events?{query}"), &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["total"].as_u64().expect("a total")
}

/// Whether an error text says that the address is private, loopback or link-local.
fn says_private(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    e.contains("private") || e.contains("loopback") || e.contains("link-local")
}

#[test]
fn a_workflow_is_created_with_its_defaults_listed_newest_first_patched_and_deleted() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let other = app.create_project("Other");
    let w = create_workflow(
        &app,
        &p,
        json!({"name": "Onboarding", "description": "Welcome new users", "triggerEvent": "signup",
               "steps": [delay_step("pause", 1, "hours", json!(null))]}),
    );
    let wid = id(&w);
    assert_eq!(
        (
            w["name"].as_str(),
            w["description"].as_str(),
            w["triggerEvent"].as_str(),
            w["enabled"].as_bool(),
            w["allowReentry"].as_bool()
        ),
        (
            Some("Onboarding"),
            Some("Welcome new users"),
            Some("signup"),
            Some(false),
            Some(false)
        ),
        "enabled and allowReentry default to false: {w}"
    );
    assert_eq!(
        (
            w["steps"][0]["id"].as_str(),
            w["steps"][0]["type"].as_str(),
            w["steps"][0]["config"]["amount"].as_i64(),
            w["steps"][0]["config"]["unit"].as_str()
        ),
        (Some("pause"), Some("DELAY"), Some(1), Some("hours")),
        "{w}"
    );
    assert!(w["steps"][0]["next"].is_null(), "{w}");
    for key in ["createdAt", "updatedAt"] {
        assert!(
            w[key].as_str().is_some_and(|t| t.ends_with('Z')),
            "{key} is an ISO 8601 UTC time: {w}"
        );
    }
    let got = app.get(&format!("/workflows/{wid}"), &p.secret);
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(got.json(), w, "GET gives the record that create gave");
    let r = app.get(&format!("/workflows/{wid}"), &other.secret);
    assert_eq!(
        (r.status, r.code().as_str()),
        (404, "WORKFLOW_NOT_FOUND"),
        "another project does not see it: {}",
        r.text
    );

    let second = create_workflow(
        &app,
        &p,
        json!({"name": "Second", "enabled": true, "allowReentry": true, "triggerEvent": "ping",
               "steps": [{"id": "end", "type": "EXIT", "config": {}, "next": null}]}),
    );
    assert_eq!(
        (
            second["enabled"].as_bool(),
            second["allowReentry"].as_bool()
        ),
        (Some(true), Some(true)),
        "{second}"
    );
    let list = app.get("/workflows", &p.secret).json();
    assert_eq!(list["total"], 2, "{list}");
    let names: Vec<&str> = list["workflows"]
        .as_array()
        .expect("a workflows array")
        .iter()
        .map(|w| w["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["Second", "Onboarding"], "newest first");
    let page = app.get("/workflows?limit=1", &p.secret).json();
    assert_eq!(
        (
            page["workflows"][0]["name"].as_str(),
            page["hasMore"].as_bool()
        ),
        (Some("Second"), Some(true)),
        "{page}"
    );
    let cursor = page["cursor"].as_str().expect("a cursor").to_owned();
    let page = app
        .get(&format!("/workflows?limit=1&cursor={cursor}"), &p.secret)
        .json();
    assert_eq!(
        (
            page["workflows"][0]["name"].as_str(),
            page["hasMore"].as_bool()
        ),
        (Some("Onboarding"), Some(false)),
        "{page}"
    );
    assert!(page["cursor"].is_null(), "{page}");
    assert_eq!(app.get("/workflows", &other.secret).json()["total"], 0);

    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"name": "Renamed", "steps": [delay_step("a", 2, "minutes", json!("b")),
               {"id": "b", "type": "EXIT", "config": {}, "next": null}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let patched = r.json();
    assert_eq!(
        (
            patched["name"].as_str(),
            patched["description"].as_str(),
            patched["triggerEvent"].as_str(),
            patched["enabled"].as_bool()
        ),
        (
            Some("Renamed"),
            Some("Welcome new users"),
            Some("signup"),
            Some(false)
        ),
        "fields left out stay as they were: {patched}"
    );
    let ids: Vec<&str> = patched["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["a", "b"], "the steps were replaced: {patched}");
    assert_eq!(
        app.get(&format!("/workflows/{wid}"), &p.secret).json()["name"],
        "Renamed"
    );

    let r = app.delete(&format!("/workflows/{wid}"), &other.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "WORKFLOW_NOT_FOUND"));
    let r = app.delete(&format!("/workflows/{wid}"), &p.secret);
    assert_eq!(r.status, 204, "{}", r.text);
    assert!(r.text.is_empty(), "no body: {}", r.text);
    let r = app.get(&format!("/workflows/{wid}"), &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "WORKFLOW_NOT_FOUND"));
    assert_eq!(app.get("/workflows", &p.secret).json()["total"], 1);
}

#[test]
fn a_pro_contact_gets_the_second_email_three_days_later_and_a_free_contact_exits_after_the_first() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let welcome = template(&app, &p, "Welcome", "Welcome aboard");
    let tips = template(&app, &p, "Tips", "Pro tips");
    let wid = enabled_workflow(
        &app,
        &p,
        "Onboarding",
        "signup",
        false,
        json!([
            send_step("welcome", &welcome, json!("wait")),
            delay_step("wait", 3, "days", json!("check")),
            {"id": "check", "type": "CONDITION",
             "config": {"field": "data.plan", "operator": "equals", "value": "pro"},
             "yes": "tips", "no": "leave"},
            send_step("tips", &tips, json!(null)),
            {"id": "leave", "type": "EXIT", "config": {}, "next": null}
        ]),
    );
    let pro = track_with(
        &app,
        &p,
        json!({"email": "pro@example.com", "event": "signup", "data": {"plan": "pro"}}),
    );
    let waiting = execution_when(&app, &p, &wid, &pro, "WAITING");
    let pro_run = id(&waiting);
    assert_eq!(waiting["currentStepId"], "wait", "{waiting}");
    assert_eq!(waiting["workflowId"], wid.as_str(), "{waiting}");
    assert_eq!(waiting["contactId"], pro.as_str(), "{waiting}");
    assert!(waiting["startedAt"].is_string(), "{waiting}");
    assert!(waiting["completedAt"].is_null(), "{waiting}");
    // The free contact starts after the pro one, so its execution is the newer.
    let free = track_with(
        &app,
        &p,
        json!({"email": "free@example.com", "event": "signup", "data": {"plan": "free"}}),
    );
    let free_run = id(&execution_when(&app, &p, &wid, &free, "WAITING"));
    let welcome_at = wait_mail(&smtp, "pro@example.com", "Welcome aboard");
    wait_mail(&smtp, "free@example.com", "Welcome aboard");

    // A minute short of three days, nothing more happens.
    advance(&app, 3 * DAY_MS - 60 * SECOND_MS);
    control(&app, &p, &smtp, "control-early@example.com");
    assert_eq!(
        mails(&smtp, "pro@example.com", "Pro tips"),
        0,
        "not before three days"
    );
    assert_eq!(
        execution(&app, &p, &wid, &pro_run)["status"],
        "WAITING",
        "still waiting"
    );

    advance(&app, 61 * SECOND_MS);
    let tips_at = wait_mail(&smtp, "pro@example.com", "Pro tips");
    assert!(
        welcome_at < tips_at,
        "the second email arrives after the first ({welcome_at} < {tips_at})"
    );
    let done = execution_when(&app, &p, &wid, &pro, "COMPLETED");
    assert_eq!(id(&done), pro_run, "the same execution went on");
    assert_eq!(
        trail(&done),
        tuples(&[
            ("welcome", "SEND_EMAIL", "COMPLETED"),
            ("wait", "DELAY", "COMPLETED"),
            ("check", "CONDITION", "COMPLETED"),
            ("tips", "SEND_EMAIL", "COMPLETED"),
        ]),
        "{done}"
    );
    assert_eq!(entry(&done, "check")["branch"], "yes", "{done}");
    assert!(
        done["history"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["at"].as_str().is_some_and(|t| t.ends_with('Z'))),
        "each entry has its time: {done}"
    );
    assert!(done["completedAt"].is_string(), "{done}");

    let exited = execution_when(&app, &p, &wid, &free, "EXITED");
    let t = trail(&exited);
    assert!(t.len() >= 3, "{exited}");
    assert_eq!(
        t[..3],
        tuples(&[
            ("welcome", "SEND_EMAIL", "COMPLETED"),
            ("wait", "DELAY", "COMPLETED"),
            ("check", "CONDITION", "COMPLETED"),
        ])[..],
        "{exited}"
    );
    assert!(
        t.len() == 3 || (t.len() == 4 && t[3].0 == "leave" && t[3].1 == "EXIT"),
        "the free contact's path ends at the EXIT step: {exited}"
    );
    assert_eq!(entry(&exited, "check")["branch"], "no", "{exited}");

    // The email of the workflow names its execution.
    let raw = smtp.received()[tips_at].text();
    let r = app.get(&format!("/emails/{}", email_id_of(&raw)), &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json()["data"]["workflowExecutionId"],
        pro_run.as_str(),
        "{}",
        r.text
    );

    control(&app, &p, &smtp, "control-late@example.com");
    assert_eq!(
        (
            mails(&smtp, "pro@example.com", "Welcome aboard"),
            mails(&smtp, "pro@example.com", "Pro tips"),
            mails(&smtp, "free@example.com", "Welcome aboard"),
            mails(&smtp, "free@example.com", "Pro tips"),
        ),
        (1, 1, 1, 0),
        "the free contact got only the first email, and nobody got a copy twice"
    );

    // The executions list: newest first, filtered by status, paged.
    let list = executions(&app, &p, &wid, "");
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(
        (
            list["executions"][0]["id"].as_str(),
            list["executions"][1]["id"].as_str()
        ),
        (Some(free_run.as_str()), Some(pro_run.as_str())),
        "newest first: {list}"
    );
    let completed = executions(&app, &p, &wid, "status=COMPLETED");
    assert_eq!(
        (
            completed["total"].as_u64(),
            completed["executions"][0]["id"].as_str()
        ),
        (Some(1), Some(pro_run.as_str())),
        "{completed}"
    );
    let exited = executions(&app, &p, &wid, "status=EXITED");
    assert_eq!(
        (
            exited["total"].as_u64(),
            exited["executions"][0]["id"].as_str()
        ),
        (Some(1), Some(free_run.as_str())),
        "{exited}"
    );
    assert_eq!(executions(&app, &p, &wid, "status=WAITING")["total"], 0);
    let page = executions(&app, &p, &wid, "limit=1");
    assert_eq!(
        (
            page["executions"][0]["id"].as_str(),
            page["hasMore"].as_bool()
        ),
        (Some(free_run.as_str()), Some(true)),
        "{page}"
    );
    let cursor = page["cursor"].as_str().expect("a cursor").to_owned();
    let page = executions(&app, &p, &wid, &format!("limit=1&cursor={cursor}"));
    assert_eq!(
        (
            page["executions"][0]["id"].as_str(),
            page["hasMore"].as_bool()
        ),
        (Some(pro_run.as_str()), Some(false)),
        "{page}"
    );
    assert!(page["cursor"].is_null(), "{page}");
}

#[test]
fn without_reentry_a_contact_enters_a_workflow_once_however_often_the_event_comes() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let hello = template(&app, &p, "Welcome", "Welcome, once");
    let wid = enabled_workflow(
        &app,
        &p,
        "Once",
        "signup",
        false,
        json!([send_step("send", &hello, json!(null))]),
    );
    let seen = witness(&app, &p, "signup");
    let ada = track(&app, &p, "ada@example.com", "signup");
    execution_when(&app, &p, &wid, &ada, "COMPLETED");
    witnessed(&app, &p, &seen, &ada, 1);
    wait_mail(&smtp, "ada@example.com", "Welcome, once");

    track(&app, &p, "ada@example.com", "signup");
    witnessed(&app, &p, &seen, &ada, 2);
    let list = executions(&app, &p, &wid, "");
    assert_eq!(
        list["total"], 1,
        "the finished execution does not let the contact in again: {list}"
    );
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(mails(&smtp, "ada@example.com", "Welcome, once"), 1);
}

#[test]
fn with_reentry_a_contact_has_one_running_execution_at_a_time_and_a_new_one_after_it_ends() {
    let (_dns, _smtp, app, p) = rig(|_| {});
    let wid = enabled_workflow(
        &app,
        &p,
        "Repeat",
        "ping",
        true,
        json!([delay_step("pause", 1, "hours", json!(null))]),
    );
    let seen = witness(&app, &p, "ping");
    let ada = track(&app, &p, "ada@example.com", "ping");
    let first = id(&execution_when(&app, &p, &wid, &ada, "WAITING"));
    witnessed(&app, &p, &seen, &ada, 1);
    for n in 2..=3 {
        track(&app, &p, "ada@example.com", "ping");
        witnessed(&app, &p, &seen, &ada, n);
    }
    let list = executions(&app, &p, &wid, "");
    assert_eq!(
        list["total"], 1,
        "no second execution while the first waits: {list}"
    );

    advance(&app, HOUR_MS + SECOND_MS);
    let done = execution_when(&app, &p, &wid, &ada, "COMPLETED");
    assert_eq!(id(&done), first, "{done}");
    assert_eq!(
        trail(&done),
        tuples(&[("pause", "DELAY", "COMPLETED")]),
        "{done}"
    );

    track(&app, &p, "ada@example.com", "ping");
    witnessed(&app, &p, &seen, &ada, 4);
    let second = id(&execution_when(&app, &p, &wid, &ada, "WAITING"));
    assert_ne!(second, first, "a new execution");
    let list = executions(&app, &p, &wid, "");
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(
        (
            list["executions"][0]["id"].as_str(),
            list["executions"][1]["id"].as_str()
        ),
        (Some(second.as_str()), Some(first.as_str())),
        "newest first: {list}"
    );
    let waiting = executions(&app, &p, &wid, "status=WAITING");
    assert_eq!(
        (
            waiting["total"].as_u64(),
            waiting["executions"][0]["id"].as_str()
        ),
        (Some(1), Some(second.as_str())),
        "{waiting}"
    );
}

#[test]
fn a_disabled_workflow_starts_nothing_until_it_is_enabled() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let hello = template(&app, &p, "Hello", "Hello from a workflow");
    let w = create_workflow(
        &app,
        &p,
        json!({"name": "Not yet", "triggerEvent": "signup",
               "steps": [send_step("send", &hello, json!(null))]}),
    );
    assert_eq!(w["enabled"], false, "disabled by default: {w}");
    let wid = id(&w);
    let seen = witness(&app, &p, "signup");
    let ada = track(&app, &p, "ada@example.com", "signup");
    witnessed(&app, &p, &seen, &ada, 1);
    assert_eq!(
        executions(&app, &p, &wid, "")["total"],
        0,
        "a disabled workflow starts nothing"
    );

    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"enabled": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let patched = r.json();
    assert_eq!(
        (
            patched["enabled"].as_bool(),
            patched["name"].as_str(),
            patched["steps"].as_array().map(Vec::len)
        ),
        (Some(true), Some("Not yet"), Some(1)),
        "{patched}"
    );
    track(&app, &p, "ada@example.com", "signup");
    witnessed(&app, &p, &seen, &ada, 2);
    execution_when(&app, &p, &wid, &ada, "COMPLETED");
    wait_mail(&smtp, "ada@example.com", "Hello from a workflow");
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        mails(&smtp, "ada@example.com", "Hello from a workflow"),
        1,
        "the event before enabling sent nothing"
    );
    assert_eq!(executions(&app, &p, &wid, "")["total"], 1);
}

/// A workflow on "signup" that waits an hour for "purchase": then "thanks" sends
/// `on_event`, and on the timeout "nudge" sends `on_timeout`.
fn purchase_workflow(app: &TestApp, p: &Project, on_event: &str, on_timeout: &str) -> String {
    enabled_workflow(
        app,
        p,
        "Purchase follow-up",
        "signup",
        false,
        json!([
            {"id": "wait", "type": "WAIT_FOR_EVENT",
             "config": {"eventName": "purchase", "timeoutSeconds": 3600},
             "next": "thanks", "timeoutNext": "nudge"},
            send_step("thanks", on_event, json!(null)),
            send_step("nudge", on_timeout, json!(null))
        ]),
    )
}

#[test]
fn a_wait_for_event_goes_to_next_when_the_event_comes_for_that_contact() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let thanks = template(&app, &p, "Thanks", "Thanks for your purchase");
    let nudge = template(&app, &p, "Nudge", "Still thinking it over?");
    let wid = purchase_workflow(&app, &p, &thanks, &nudge);
    let buyer = track(&app, &p, "buyer@example.com", "signup");
    let browser = track(&app, &p, "browser@example.com", "signup");
    for contact in [&buyer, &browser] {
        let e = execution_when(&app, &p, &wid, contact, "WAITING");
        assert_eq!(e["currentStepId"], "wait", "{e}");
    }

    track(&app, &p, "buyer@example.com", "purchase");
    wait_mail(&smtp, "buyer@example.com", "Thanks for your purchase");
    let done = execution_when(&app, &p, &wid, &buyer, "COMPLETED");
    assert_eq!(
        trail(&done),
        tuples(&[
            ("wait", "WAIT_FOR_EVENT", "COMPLETED"),
            ("thanks", "SEND_EMAIL", "COMPLETED"),
        ]),
        "{done}"
    );
    let other = &executions_of(&app, &p, &wid, &browser)[0];
    assert_eq!(
        other["status"], "WAITING",
        "another contact's purchase does not end this wait: {other}"
    );

    // Past the timeout: the browser is nudged, the buyer (whose wait ended) is not.
    advance(&app, 3_601 * SECOND_MS);
    wait_mail(&smtp, "browser@example.com", "Still thinking it over?");
    execution_when(&app, &p, &wid, &browser, "COMPLETED");
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        (
            mails(&smtp, "buyer@example.com", "Thanks for your purchase"),
            mails(&smtp, "buyer@example.com", "Still thinking it over?"),
            mails(&smtp, "browser@example.com", "Thanks for your purchase"),
        ),
        (1, 0, 0),
        "the buyer's timeout was dropped when the event came"
    );
}

#[test]
fn a_wait_for_event_goes_to_timeout_next_when_the_timeout_passes_first() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let thanks = template(&app, &p, "Thanks", "Thanks for your purchase");
    let nudge = template(&app, &p, "Nudge", "Still thinking it over?");
    let wid = purchase_workflow(&app, &p, &thanks, &nudge);
    let ada = track(&app, &p, "ada@example.com", "signup");
    let run = id(&execution_when(&app, &p, &wid, &ada, "WAITING"));

    advance(&app, 3_500 * SECOND_MS);
    control(&app, &p, &smtp, "control-early@example.com");
    assert_eq!(
        mails(&smtp, "ada@example.com", "Still thinking it over?"),
        0,
        "not before the timeout"
    );
    assert_eq!(execution(&app, &p, &wid, &run)["status"], "WAITING");

    advance(&app, 101 * SECOND_MS);
    wait_mail(&smtp, "ada@example.com", "Still thinking it over?");
    let done = execution_when(&app, &p, &wid, &ada, "COMPLETED");
    assert_eq!(
        trail(&done),
        tuples(&[
            ("wait", "WAIT_FOR_EVENT", "TIMED_OUT"),
            ("nudge", "SEND_EMAIL", "COMPLETED"),
        ]),
        "{done}"
    );

    // A purchase after the timeout changes nothing.
    track(&app, &p, "ada@example.com", "purchase");
    control(&app, &p, &smtp, "control-late@example.com");
    assert_eq!(
        (
            mails(&smtp, "ada@example.com", "Still thinking it over?"),
            mails(&smtp, "ada@example.com", "Thanks for your purchase"),
        ),
        (1, 0)
    );
    assert_eq!(execution(&app, &p, &wid, &run)["status"], "COMPLETED");
}

#[test]
fn update_contact_changes_the_contact_and_the_segment_entry_it_causes_starts_another_workflow() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Pros", "trackMembership": true, "filters":
               {"operator": "AND", "conditions": [{"field": "data.plan", "operator": "equals", "value": "pro"}]}}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let segment = id(&r.json());
    let wid = enabled_workflow(
        &app,
        &p,
        "Upgrade",
        "signup",
        false,
        json!([
            {"id": "upgrade", "type": "UPDATE_CONTACT",
             "config": {"data": {"plan": "pro"}, "subscribed": false}, "next": "check"},
            {"id": "check", "type": "CONDITION",
             "config": {"field": "data.plan", "operator": "equals", "value": "pro"},
             "yes": null, "no": "leave"},
            {"id": "leave", "type": "EXIT", "config": {}, "next": null}
        ]),
    );
    let on_entry = enabled_workflow(
        &app,
        &p,
        "Welcome pros",
        "segment.pros.entry",
        false,
        json!([{"id": "end", "type": "EXIT", "config": {}, "next": null}]),
    );
    let ada = track_with(
        &app,
        &p,
        json!({"email": "ada@example.com", "event": "signup", "data": {"name": "Ada", "plan": "free"}}),
    );
    let done = execution_when(&app, &p, &wid, &ada, "COMPLETED");
    assert_eq!(
        trail(&done),
        tuples(&[
            ("upgrade", "UPDATE_CONTACT", "COMPLETED"),
            ("check", "CONDITION", "COMPLETED"),
        ]),
        "{done}"
    );
    assert_eq!(
        entry(&done, "check")["branch"],
        "yes",
        "the condition sees the updated contact: {done}"
    );

    let contact = app.get(&format!("/contacts/{ada}"), &p.secret).json();
    assert_eq!(
        (
            contact["data"]["plan"].as_str(),
            contact["data"]["name"].as_str(),
            contact["subscribed"].as_bool()
        ),
        (Some("pro"), Some("Ada"), Some(false)),
        "data merged, subscription changed: {contact}"
    );
    let query = format!("name=segment.pros.entry&contactId={ada}");
    let entries = eventually(10, || event_count(&app, &p, &query), |n: &u64| *n >= 1);
    assert_eq!(entries, 1, "the contact entered the segment once");
    let e = &app.get(&format!("/events?{query}"), &p.secret).json()["events"][0];
    assert_eq!(e["source"], "SYSTEM", "{e}");
    assert_eq!(
        event_count(
            &app,
            &p,
            &format!("name=contact.unsubscribed&contactId={ada}")
        ),
        1
    );
    assert_eq!(
        app.get(&format!("/segments/{segment}"), &p.secret).json()["memberCount"],
        1
    );
    let entered = execution_when(&app, &p, &on_entry, &ada, "EXITED");
    assert_eq!(entered["contactId"], ada.as_str(), "{entered}");
}

#[test]
fn a_system_event_such_as_contact_subscribed_triggers_a_workflow() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let thanks = template(&app, &p, "Subscribed", "Thanks for subscribing");
    let wid = enabled_workflow(
        &app,
        &p,
        "On subscribe",
        "contact.subscribed",
        false,
        json!([send_step("send", &thanks, json!(null))]),
    );
    let c = app.upsert(
        &p.secret,
        json!({"email": "late@example.com", "subscribed": false}),
    );
    let cid = id(&c);
    app.upsert(
        &p.secret,
        json!({"email": "late@example.com", "subscribed": true}),
    );
    let done = execution_when(&app, &p, &wid, &cid, "COMPLETED");
    assert_eq!(
        trail(&done),
        tuples(&[("send", "SEND_EMAIL", "COMPLETED")]),
        "{done}"
    );
    wait_mail(&smtp, "late@example.com", "Thanks for subscribing");
}

#[test]
fn a_webhook_step_posts_the_contact_and_the_execution_with_its_headers_and_keeps_the_status() {
    let hook = HookServer::start(200);
    let (_dns, _smtp, app, p) = rig(|s| s.workflows.allow_private_webhooks = true);
    let wid = enabled_workflow(
        &app,
        &p,
        "Notify",
        "signup",
        false,
        json!([{"id": "hook", "type": "WEBHOOK",
                "config": {"url": hook.url("/hooks/signup?src=mailroom"), "method": "POST",
                           "headers": {"X-Hook-Secret": "s3cret"},
                           "body": {"plan": "pro", "tags": ["a", "b"]}},
                "next": null}]),
    );
    let ada = track_with(
        &app,
        &p,
        json!({"email": "ada@example.com", "event": "signup", "data": {"name": "Ada"}}),
    );
    let done = execution_when(&app, &p, &wid, &ada, "COMPLETED");
    let run = id(&done);
    assert_eq!(
        trail(&done),
        tuples(&[("hook", "WEBHOOK", "COMPLETED")]),
        "{done}"
    );
    assert_eq!(entry(&done, "hook")["statusCode"], 200, "{done}");

    let hits = hook.hits();
    assert_eq!(hits.len(), 1, "one request: {hits:?}");
    let hit = &hits[0];
    assert_eq!(hit.method, "POST");
    assert_eq!(hit.path, "/hooks/signup?src=mailroom");
    assert_eq!(hit.header("X-Hook-Secret"), Some("s3cret"), "{hit:?}");
    assert!(
        hit.header("Content-Type")
            .is_some_and(|t| t.contains("application/json")),
        "{hit:?}"
    );
    let body = hit.json();
    assert_eq!(
        (
            body["workflow"]["id"].as_str(),
            body["workflow"]["name"].as_str()
        ),
        (Some(wid.as_str()), Some("Notify")),
        "{body}"
    );
    assert_eq!(
        (
            body["execution"]["id"].as_str(),
            body["execution"]["stepId"].as_str()
        ),
        (Some(run.as_str()), Some("hook")),
        "{body}"
    );
    assert_eq!(
        (
            body["contact"]["id"].as_str(),
            body["contact"]["email"].as_str(),
            body["contact"]["subscribed"].as_bool(),
            body["contact"]["data"]["name"].as_str()
        ),
        (
            Some(ada.as_str()),
            Some("ada@example.com"),
            Some(true),
            Some("Ada")
        ),
        "{body}"
    );
    assert_eq!(
        body["body"],
        json!({"plan": "pro", "tags": ["a", "b"]}),
        "{body}"
    );
}

#[test]
fn a_webhook_answered_with_500_fails_the_step_and_the_execution_with_the_status_kept() {
    let hook = HookServer::start(500);
    let (_dns, smtp, app, p) = rig(|s| s.workflows.allow_private_webhooks = true);
    let after = template(&app, &p, "After", "After the webhook");
    let wid = enabled_workflow(
        &app,
        &p,
        "Notify",
        "signup",
        false,
        json!([
            {"id": "hook", "type": "WEBHOOK",
             "config": {"url": hook.url("/hooks"), "method": "PUT"}, "next": "send"},
            send_step("send", &after, json!(null))
        ]),
    );
    let ada = track(&app, &p, "ada@example.com", "signup");
    let failed = execution_when(&app, &p, &wid, &ada, "FAILED");
    assert_eq!(
        trail(&failed),
        tuples(&[("hook", "WEBHOOK", "FAILED")]),
        "the step after the failure did not run: {failed}"
    );
    let hook_entry = entry(&failed, "hook");
    assert_eq!(hook_entry["statusCode"], 500, "{failed}");
    assert!(
        hook_entry["error"].as_str().is_some_and(|e| !e.is_empty()),
        "the reason is kept: {failed}"
    );
    let hits = hook.hits();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].method, "PUT");
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(mails(&smtp, "ada@example.com", "After the webhook"), 0);
}

#[test]
fn webhooks_to_loopback_private_and_link_local_addresses_are_refused_without_the_flag() {
    let hook = HookServer::start(200);
    let (_dns, smtp, app, p) = rig(|_| {});
    let after = template(&app, &p, "After", "After the webhook");
    let targets = [
        hook.url("/hooks"),
        "http://10.1.2.3/hooks".to_owned(),
        "http://192.168.1.10/hooks".to_owned(),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        format!("http://[::1]:{}/hooks", hook.port()),
    ];
    let workflows: Vec<(String, String)> = targets
        .iter()
        .map(|url| {
            let wid = enabled_workflow(
                &app,
                &p,
                &format!("Hook to {url}"),
                "signup",
                false,
                json!([
                    {"id": "hook", "type": "WEBHOOK",
                     "config": {"url": url, "method": "POST", "body": {"x": 1}}, "next": "send"},
                    send_step("send", &after, json!(null))
                ]),
            );
            (url.clone(), wid)
        })
        .collect();
    let ada = track(&app, &p, "ada@example.com", "signup");
    for (url, wid) in &workflows {
        let failed = execution_when(&app, &p, wid, &ada, "FAILED");
        assert_eq!(
            trail(&failed),
            tuples(&[("hook", "WEBHOOK", "FAILED")]),
            "{url}: {failed}"
        );
        let error = entry(&failed, "hook")["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            says_private(&error),
            "{url}: the reason says the address is private: {failed}"
        );
    }
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(mails(&smtp, "ada@example.com", "After the webhook"), 0);
    assert!(
        hook.hits().is_empty(),
        "nothing reached the loopback server: {:?}",
        hook.hits()
    );
}

#[test]
fn a_failing_step_fails_its_execution_with_the_reason_while_other_executions_go_on() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let never = template(&app, &p, "Never", "After a refused webhook");
    let hello = template(&app, &p, "Hello", "Hello there");
    let failing = enabled_workflow(
        &app,
        &p,
        "Refused hook",
        "signup",
        false,
        json!([
            {"id": "hook", "type": "WEBHOOK",
             "config": {"url": "http://127.0.0.1:9/hooks", "method": "POST"}, "next": "send"},
            send_step("send", &never, json!(null))
        ]),
    );
    let fine = enabled_workflow(
        &app,
        &p,
        "Hello",
        "signup",
        false,
        json!([send_step("send", &hello, json!(null))]),
    );
    for email in ["a@example.com", "b@example.com"] {
        let contact = track(&app, &p, email, "signup");
        let failed = execution_when(&app, &p, &failing, &contact, "FAILED");
        let reason = entry(&failed, "hook")["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(says_private(&reason), "{failed}");
        assert_eq!(
            trail(&failed),
            tuples(&[("hook", "WEBHOOK", "FAILED")]),
            "{failed}"
        );
        let done = execution_when(&app, &p, &fine, &contact, "COMPLETED");
        assert_eq!(
            trail(&done),
            tuples(&[("send", "SEND_EMAIL", "COMPLETED")]),
            "{done}"
        );
        wait_mail(&smtp, email, "Hello there");
    }
    assert_eq!(executions(&app, &p, &failing, "status=FAILED")["total"], 2);
    assert_eq!(executions(&app, &p, &fine, "status=COMPLETED")["total"], 2);
    control(&app, &p, &smtp, "control@example.com");
    for email in ["a@example.com", "b@example.com"] {
        assert_eq!(mails(&smtp, email, "After a refused webhook"), 0);
        assert_eq!(mails(&smtp, email, "Hello there"), 1);
    }
}

/// Asserts a 422 VALIDATION_ERROR with an error on `steps.<step>` or below it.
fn assert_names_step(r: &Resp, step: &str, what: &str) {
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "{what}: {}",
        r.text
    );
    let field = format!("steps.{step}");
    let fields = r.field_codes();
    assert!(
        fields
            .iter()
            .any(|(f, _)| *f == field || f.starts_with(&format!("{field}."))),
        "{what}: an error names {field}: {fields:?}"
    );
}

#[test]
fn an_invalid_step_graph_is_refused_with_the_step_it_concerns() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let exit = |step: &str| json!({"id": step, "type": "EXIT", "config": {}, "next": null});
    let post = |steps: Value| {
        app.post(
            "/workflows",
            &p.secret,
            json!({"name": "Bad", "triggerEvent": "signup", "steps": steps}),
        )
    };

    // Cycles.
    let r = post(json!([
        delay_step("a", 1, "minutes", json!("b")),
        delay_step("b", 1, "minutes", json!("a"))
    ]));
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "a cycle: {}",
        r.text
    );
    assert!(
        r.field_codes().iter().any(|(f, _)| f.starts_with("steps.")),
        "a cycle names a step: {:?}",
        r.field_codes()
    );
    let r = post(json!([delay_step("a", 1, "minutes", json!("a"))]));
    assert_names_step(&r, "a", "a step that is its own next");
    let r = post(json!([
        {"id": "c", "type": "CONDITION",
         "config": {"field": "data.plan", "operator": "equals", "value": "pro"},
         "yes": "d", "no": null},
        delay_step("d", 1, "minutes", json!("c"))
    ]));
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "a cycle through a condition: {}",
        r.text
    );
    assert!(
        r.field_codes().iter().any(|(f, _)| f.starts_with("steps.")),
        "{:?}",
        r.field_codes()
    );

    // References and reachability.
    let r = post(json!([delay_step("a", 1, "minutes", json!("nowhere"))]));
    assert_names_step(&r, "a", "a next that names no step");
    let r = post(json!([
        {"id": "c", "type": "CONDITION",
         "config": {"field": "data.plan", "operator": "equals", "value": "pro"},
         "yes": "gone", "no": null}
    ]));
    assert_names_step(&r, "c", "a yes that names no step");
    let r = post(json!([
        {"id": "w", "type": "WAIT_FOR_EVENT",
         "config": {"eventName": "purchase", "timeoutSeconds": 60},
         "next": null, "timeoutNext": "gone"}
    ]));
    assert_names_step(&r, "w", "a timeoutNext that names no step");
    let r = post(json!([
        delay_step("a", 1, "minutes", json!(null)),
        exit("orphan")
    ]));
    assert_names_step(&r, "orphan", "a step that nothing leads to");
    let r = post(json!([
        {"id": "w", "type": "WAIT_FOR_EVENT",
         "config": {"eventName": "purchase", "timeoutSeconds": 60}, "next": null}
    ]));
    assert_names_step(&r, "w", "a WAIT_FOR_EVENT without timeoutNext");
    let r = post(json!([
        delay_step("a", 1, "minutes", json!("b")),
        exit("b"),
        exit("b")
    ]));
    assert_names_step(&r, "b", "two steps with one id");
    let r = post(json!([]));
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "no steps: {}",
        r.text
    );
    assert!(
        r.field_codes().iter().any(|(f, _)| f == "steps"),
        "{:?}",
        r.field_codes()
    );

    // Configs that do not fit their type.
    let r = post(json!([{"id": "d", "type": "DELAY", "config": {"unit": "days"}, "next": null}]));
    assert_names_step(&r, "d", "a DELAY without an amount");
    let r = post(json!([delay_step("d", 1, "weeks", json!(null))]));
    assert_names_step(&r, "d", "a DELAY in an unknown unit");
    let r = post(json!([delay_step("d", 0, "days", json!(null))]));
    assert_names_step(&r, "d", "a DELAY of zero");
    let r = post(json!([
        {"id": "w", "type": "WAIT_FOR_EVENT", "config": {"eventName": "purchase", "timeoutSeconds": 0},
         "next": null, "timeoutNext": null}
    ]));
    assert_names_step(&r, "w", "a WAIT_FOR_EVENT with a zero timeout");
    let r = post(json!([
        {"id": "c", "type": "CONDITION",
         "config": {"field": "data.plan", "operator": "resembles", "value": "pro"},
         "yes": null, "no": null}
    ]));
    assert_names_step(&r, "c", "a CONDITION with an unknown operator");
    let r = post(json!([
        {"id": "h", "type": "WEBHOOK",
         "config": {"url": "https://hooks.example.com/x", "method": "TRACE"}, "next": null}
    ]));
    assert_names_step(&r, "h", "a WEBHOOK with an unknown method");
    let r = post(json!([{"id": "x", "type": "TELEPORT", "config": {}, "next": null}]));
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "{}",
        r.text
    );
    assert!(
        r.field_codes().iter().any(|(f, _)| f == "steps.x.type"),
        "an unknown type names steps.x.type: {:?}",
        r.field_codes()
    );

    // Missing fields.
    let r = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "No trigger", "steps": [exit("end")]}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(
        r.field_codes()
            .contains(&("triggerEvent".to_owned(), "invalid_type".to_owned())),
        "{:?}",
        r.field_codes()
    );
    let r = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "No steps", "triggerEvent": "signup"}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(
        r.field_codes().iter().any(|(f, _)| f == "steps"),
        "{:?}",
        r.field_codes()
    );

    // A template that does not exist.
    let r = post(json!([send_step("s", MISSING_ID, json!(null))]));
    assert_eq!(
        (r.status, r.code().as_str()),
        (404, "TEMPLATE_NOT_FOUND"),
        "{}",
        r.text
    );
    assert_eq!(
        app.get("/workflows", &p.secret).json()["total"],
        0,
        "nothing refused was kept"
    );

    // PATCH validates the same way and leaves the workflow as it was.
    let w = create_workflow(
        &app,
        &p,
        json!({"name": "Good", "triggerEvent": "signup",
               "steps": [delay_step("d", 1, "hours", json!(null))]}),
    );
    let wid = id(&w);
    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"steps": [delay_step("a", 1, "minutes", json!("b")),
                         delay_step("b", 1, "minutes", json!("a"))]}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "{}",
        r.text
    );
    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"steps": [delay_step("a", 1, "minutes", json!("nowhere"))]}),
    );
    assert_names_step(&r, "a", "PATCH: a next that names no step");
    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"steps": []}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"steps": [send_step("s", MISSING_ID, json!(null))]}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (404, "TEMPLATE_NOT_FOUND"),
        "{}",
        r.text
    );
    assert_eq!(
        app.get(&format!("/workflows/{wid}"), &p.secret).json()["steps"],
        w["steps"],
        "the refused PATCHes changed nothing"
    );
}

#[test]
fn an_unknown_workflow_or_execution_is_404() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let missing = format!("/workflows/{MISSING_ID}");
    for r in [
        app.get(&missing, &p.secret),
        app.patch(&missing, &p.secret, json!({"name": "x"})),
        app.delete(&missing, &p.secret),
        app.get(&format!("{missing}/executions"), &p.secret),
        app.get(&format!("{missing}/executions/{MISSING_ID}"), &p.secret),
    ] {
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "WORKFLOW_NOT_FOUND"),
            "{}",
            r.text
        );
    }
    let w = create_workflow(
        &app,
        &p,
        json!({"name": "Real", "triggerEvent": "signup",
               "steps": [{"id": "end", "type": "EXIT", "config": {}, "next": null}]}),
    );
    let r = app.get(
        &format!("/workflows/{}/executions/{MISSING_ID}", id(&w)),
        &p.secret,
    );
    assert_eq!(r.status, 404, "{}", r.text);
}

#[test]
fn deleting_a_workflow_cancels_its_waiting_executions() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let later = template(&app, &p, "Later", "An hour later");
    let same_time = template(&app, &p, "Witness", "Also an hour later");
    let wid = enabled_workflow(
        &app,
        &p,
        "Doomed",
        "signup",
        false,
        json!([
            delay_step("pause", 1, "hours", json!("send")),
            send_step("send", &later, json!(null))
        ]),
    );
    // A workflow with the same delay that stays: once its emails arrive, the deleted
    // workflow's timers, due at the same time, have had their turn.
    let kept = enabled_workflow(
        &app,
        &p,
        "Kept",
        "signup",
        false,
        json!([
            delay_step("pause", 1, "hours", json!("send")),
            send_step("send", &same_time, json!(null))
        ]),
    );
    let contacts = ["a@example.com", "b@example.com"];
    for email in contacts {
        let contact = track(&app, &p, email, "signup");
        execution_when(&app, &p, &wid, &contact, "WAITING");
        execution_when(&app, &p, &kept, &contact, "WAITING");
    }
    assert_eq!(executions(&app, &p, &wid, "status=WAITING")["total"], 2);

    let r = app.delete(&format!("/workflows/{wid}"), &p.secret);
    assert_eq!(r.status, 204, "{}", r.text);
    let r = app.get(&format!("/workflows/{wid}"), &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "WORKFLOW_NOT_FOUND"));
    let r = app.get(&format!("/workflows/{wid}/executions"), &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "WORKFLOW_NOT_FOUND"));

    advance(&app, HOUR_MS + SECOND_MS);
    for email in contacts {
        wait_mail(&smtp, email, "Also an hour later");
    }
    control(&app, &p, &smtp, "control@example.com");
    for email in contacts {
        assert_eq!(
            mails(&smtp, email, "An hour later"),
            0,
            "the cancelled execution sent nothing to {email}"
        );
    }
}

#[test]
fn kill_9_during_a_delay_still_sends_the_email_after_it_once_after_a_restart() {
    let (_dns, smtp, mut app, p) = rig(|_| {});
    let later = template(&app, &p, "Later", "Eight seconds later");
    let wid = enabled_workflow(
        &app,
        &p,
        "Durable",
        "signup",
        false,
        json!([
            delay_step("pause", 8, "seconds", json!("send")),
            send_step("send", &later, json!(null))
        ]),
    );
    let ada = track(&app, &p, "ada@example.com", "signup");
    let waiting = execution_when(&app, &p, &wid, &ada, "WAITING");
    assert_eq!(waiting["currentStepId"], "pause", "{waiting}");
    app.kill9();
    assert_eq!(
        mails(&smtp, "ada@example.com", "Eight seconds later"),
        0,
        "the delay had not passed at the kill"
    );

    app.restart();
    // The moved clock's offset is not kept across a restart, so move it now.
    advance(&app, 9 * SECOND_MS);
    wait_mail(&smtp, "ada@example.com", "Eight seconds later");
    let done = execution_when(&app, &p, &wid, &ada, "COMPLETED");
    assert_eq!(id(&done), id(&waiting), "the same execution went on");
    assert_eq!(
        trail(&done),
        tuples(&[
            ("pause", "DELAY", "COMPLETED"),
            ("send", "SEND_EMAIL", "COMPLETED"),
        ]),
        "{done}"
    );
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        mails(&smtp, "ada@example.com", "Eight seconds later"),
        1,
        "exactly one copy"
    );
    assert_eq!(executions(&app, &p, &wid, "")["total"], 1);
}

/// Two re-entry workflows that trigger each other: one resubscribes whoever
/// unsubscribes, the other unsubscribes whoever subscribes. Their ids (on, off).
fn subscription_loop(app: &TestApp, p: &Project) -> (String, String) {
    let on = enabled_workflow(
        app,
        p,
        "Resubscribe",
        "contact.unsubscribed",
        true,
        json!([{"id": "on", "type": "UPDATE_CONTACT", "config": {"subscribed": true}, "next": null}]),
    );
    let off = enabled_workflow(
        app,
        p,
        "Unsubscribe",
        "contact.subscribed",
        true,
        json!([{"id": "off", "type": "UPDATE_CONTACT", "config": {"subscribed": false}, "next": null}]),
    );
    (on, off)
}

/// Executions of the workflow RUNNING or WAITING.
fn live(app: &TestApp, p: &Project, wid: &str) -> u64 {
    ["RUNNING", "WAITING"]
        .iter()
        .map(|s| {
            executions(app, p, wid, &format!("status={s}"))["total"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn workflows_that_trigger_each_other_through_contact_events_stop_at_the_daily_entry_cap() {
    let (_dns, _smtp, app, p) = rig(|_| {});
    let (on, off) = subscription_loop(&app, &p);
    app.upsert(
        &p.secret,
        json!({"email": "loop@example.com", "subscribed": true}),
    );
    app.upsert(
        &p.secret,
        json!({"email": "loop@example.com", "subscribed": false}),
    );
    let total = |wid: &str| executions(&app, &p, wid, "")["total"].as_u64().unwrap_or(0);
    let settled = eventually(
        60,
        || {
            (
                total(&on),
                total(&off),
                live(&app, &p, &on) + live(&app, &p, &off),
            )
        },
        |(a, b, running): &(u64, u64, u64)| *running == 0 && *a >= 100 && *b >= 99,
    );
    assert_eq!(settled.2, 0, "the loop stopped: {settled:?}");
    assert!(
        settled.0 <= 100 && settled.1 <= 100,
        "at most 100 entries a day each: {settled:?}"
    );
}

#[test]
fn fifty_contacts_looping_through_two_workflows_each_stop_at_the_daily_entry_cap_despite_pruning() {
    const CAP: u64 = 10;
    const CONTACTS: u64 = 50;
    let (_dns, _smtp, app, p) = rig(|s| {
        s.workflows.max_entries_per_day = 10;
        // Pruning runs many times over while the loops go: it used to drop the index
        // entries that the cap counted, and the loops went on for ever.
        s.workflows.max_finished_executions = 20;
        s.limits.requests_per_minute = 1000000;
    });
    let (on, off) = subscription_loop(&app, &p);
    let contacts: Vec<String> = (0..CONTACTS)
        .map(|i| {
            let email = format!("loop{i}@example.com");
            app.upsert(&p.secret, json!({"email": email, "subscribed": true}));
            id(&app.upsert(&p.secret, json!({"email": email, "subscribed": false})))
        })
        .collect();
    // Each contact: its own unsubscribe, then CAP rounds of on (subscribed) and off
    // (unsubscribed), then on is refused.
    let named = |name: &str| event_count(&app, &p, &format!("name={name}"));
    let settled = eventually(
        180,
        || {
            let events = (named("contact.subscribed"), named("contact.unsubscribed"));
            (events, live(&app, &p, &on) + live(&app, &p, &off))
        },
        |&((sub, unsub), running): &((u64, u64), u64)| {
            running == 0 && (sub >= CONTACTS * CAP && unsub >= CONTACTS * (CAP + 1))
        },
    );
    assert_eq!(
        settled,
        ((CONTACTS * CAP, CONTACTS * (CAP + 1)), 0),
        "every loop ran to the cap and stopped: (subscribed, unsubscribed events), live executions"
    );
    for c in &contacts {
        let of = |name: &str| event_count(&app, &p, &format!("name={name}&contactId={c}"));
        assert_eq!(
            (of("contact.subscribed"), of("contact.unsubscribed")),
            (CAP, CAP + 1),
            "contact {c} entered each workflow {CAP} times, no more"
        );
    }
    assert_eq!(
        (named("contact.subscribed"), named("contact.unsubscribed")),
        (CONTACTS * CAP, CONTACTS * (CAP + 1)),
        "nothing grew after the loops stopped"
    );
}

/// The (field, code) pairs of a 422 from a workflow write.
fn refused_fields(r: &Resp) -> Vec<(String, String)> {
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "{}",
        r.text
    );
    r.field_codes()
}

/// A workflow of one step on "signup", created disabled; its id.
fn one_step_workflow(app: &TestApp, p: &Project, step: Value) -> String {
    id(&create_workflow(
        app,
        p,
        json!({"name": "One step", "triggerEvent": "signup", "steps": [step]}),
    ))
}

#[test]
fn a_wait_for_event_name_with_a_control_character_is_refused_on_create_and_patch_naming_the_field()
{
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let wait = |name: &str| {
        json!({"id": "2", "type": "WAIT_FOR_EVENT",
               "config": {"eventName": name, "timeoutSeconds": 60},
               "next": null, "timeoutNext": null})
    };
    let want = vec![(
        "steps.2.config.eventName".to_owned(),
        "invalid_string".to_owned(),
    )];
    for name in ["paid\0", "pa\nid", "paid\u{7f}", "\u{85}paid"] {
        let r = app.post(
            "/workflows",
            &p.secret,
            json!({"name": "Wait", "triggerEvent": "signup", "steps": [wait(name)]}),
        );
        assert_eq!(refused_fields(&r), want, "POST with {name:?}");
    }
    let wid = one_step_workflow(&app, &p, wait("paid"));
    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"steps": [wait("paid\u{1b}[2J")]}),
    );
    assert_eq!(refused_fields(&r), want, "PATCH");
    let kept = app.get(&format!("/workflows/{wid}"), &p.secret).json();
    assert_eq!(kept["steps"][0]["config"]["eventName"], "paid", "{kept}");
}

#[test]
fn a_webhook_url_that_cannot_parse_is_refused_on_create_and_patch_not_at_run_time() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let hook =
        |url: &str| json!({"id": "hook", "type": "WEBHOOK", "config": {"url": url}, "next": null});
    let want = vec![(
        "steps.hook.config.url".to_owned(),
        "invalid_string".to_owned(),
    )];
    for url in ["http://[::1", "http://:8080/hooks"] {
        let r = app.post(
            "/workflows",
            &p.secret,
            json!({"name": "Hook", "triggerEvent": "signup", "steps": [hook(url)]}),
        );
        assert_eq!(refused_fields(&r), want, "POST with {url}");
    }
    let wid = one_step_workflow(&app, &p, hook("https://hooks.example.com/in"));
    let r = app.patch(
        &format!("/workflows/{wid}"),
        &p.secret,
        json!({"steps": [hook("http://[::1")]}),
    );
    assert_eq!(refused_fields(&r), want, "PATCH");
}

#[test]
fn a_webhook_to_a_closed_port_fails_saying_could_not_connect_without_the_address_or_the_os_reason()
{
    // A port that was just free on loopback: nothing listens there now.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (_dns, _smtp, app, p) = rig(|s| s.workflows.allow_private_webhooks = true);
    let wid = enabled_workflow(
        &app,
        &p,
        "Scan",
        "signup",
        false,
        json!([{"id": "hook", "type": "WEBHOOK",
                "config": {"url": format!("http://127.0.0.1:{port}/x")}, "next": null}]),
    );
    let ada = track(&app, &p, "ada@example.com", "signup");
    let failed = execution_when(&app, &p, &wid, &ada, "FAILED");
    let hook_entry = entry(&failed, "hook");
    assert_eq!(hook_entry["error"], "could not connect", "{failed}");
    assert!(hook_entry["statusCode"].is_null(), "{failed}");
}

/// The fault hook (debug builds only) panics the executor once, after the SEND_EMAIL
/// step queued its email and before the step's end was written: the supervisor restarts
/// the executor, the step runs again, and its idempotency key keeps it to one email.
#[test]
fn an_execution_whose_executor_panicked_after_its_send_completes_with_one_email() {
    let (_dns, smtp, app, p) = rig(|s| s.panic_once("workflow_step"));
    let hello = template(&app, &p, "Hello", "Hello once");
    let wid = enabled_workflow(
        &app,
        &p,
        "Once",
        "signup",
        false,
        json!([send_step("send", &hello, json!(null))]),
    );
    let ada = track(&app, &p, "ada@example.com", "signup");
    let done = execution_when(&app, &p, &wid, &ada, "COMPLETED");
    assert!(
        app.log().contains("injected fault at workflow_step"),
        "the executor panicked in the step"
    );
    assert_eq!(
        trail(&done),
        tuples(&[("send", "SEND_EMAIL", "COMPLETED")]),
        "{done}"
    );
    wait_mail(&smtp, "ada@example.com", "Hello once");
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        mails(&smtp, "ada@example.com", "Hello once"),
        1,
        "exactly one copy"
    );
}
