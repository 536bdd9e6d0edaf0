//! Campaign fixtures: the rig (a verified sender and a real SMTP server on loopback),
//! campaign and contact calls, waiting with a deadline, the moved clock, and reading the
//! mail that arrives (headers, parts, links).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use mailroom_testkit::{Received, SmtpServer, TestDns};
use serde_json::{json, Value};

use super::app::{Project, Resp, TestApp, ADMIN_TOKEN};
use super::relay::app_with;
use super::settings::Setup;

/// A sender on the rig's verified domain.
pub const FROM: &str = "hello@acme.test";

/// A well-formed id that no record has.
pub const MISSING_ID: &str = "01a20f54-f3c0-75ee-88c4-81dc155616f1";

/// A test SMTP server and a server that sends through it (unpaced unless `extra` says
/// otherwise) with `acme.test` verified. The DNS server is returned to live as long as
/// the app.
pub fn rig(configure: impl FnOnce(&mut Setup)) -> (TestDns, SmtpServer, TestApp, Project) {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let (app, p) = app_with(&dns, &smtp, configure);
    (dns, smtp, app, p)
}

pub fn wait() -> Duration {
    Duration::from_secs(20)
}

/// Asks `probe` every 50 ms until `done` holds for its answer or `secs` pass; the last
/// answer (the caller asserts on it).
pub fn eventually<T>(secs: u64, mut probe: impl FnMut() -> T, done: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let answer = probe();
        if done(&answer) || Instant::now() >= deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The payload of a `{success: true, data}` answer with this status.
pub fn data(r: &Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.text);
    let v = r.json();
    assert_eq!(v["success"], true, "{}", r.text);
    v["data"].clone()
}

/// A count in a stats record.
pub fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is a count: {v}"))
}

/// Whether a rate in a stats record is `want`.
pub fn rate_is(v: &Value, key: &str, want: f64) -> bool {
    v[key].as_f64().is_some_and(|x| (x - want).abs() < 1e-9)
}

pub fn id(record: &Value) -> String {
    record["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a record with an id: {record}"))
        .to_owned()
}

/// The body of a campaign to everyone, with `fields` over the defaults.
pub fn campaign_body(fields: Value) -> Value {
    let mut body = json!({
        "name": "Spring",
        "subject": "Hello {{email}}",
        "body": "<p>Hi {{email}}</p>",
        "from": FROM,
        "type": "ALL"
    });
    if let (Some(b), Some(f)) = (body.as_object_mut(), fields.as_object()) {
        for (k, v) in f {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

/// Creates a DRAFT campaign (`campaign_body(fields)`); its record.
pub fn create(app: &TestApp, p: &Project, fields: Value) -> Value {
    let r = app.post("/campaigns", &p.secret, campaign_body(fields));
    data(&r, 201)
}

pub fn send(app: &TestApp, p: &Project, cid: &str, body: Value) -> Resp {
    app.post(&format!("/campaigns/{cid}/send"), &p.secret, body)
}

pub fn cancel(app: &TestApp, p: &Project, cid: &str) -> Resp {
    app.post(&format!("/campaigns/{cid}/cancel"), &p.secret, json!({}))
}

pub fn campaign(app: &TestApp, p: &Project, cid: &str) -> Value {
    data(&app.get(&format!("/campaigns/{cid}"), &p.secret), 200)
}

pub fn stats(app: &TestApp, p: &Project, cid: &str) -> Value {
    data(&app.get(&format!("/campaigns/{cid}/stats"), &p.secret), 200)
}

/// Polls the campaign (up to 30 s) until its status is `status`; the last record.
pub fn campaign_when(app: &TestApp, p: &Project, cid: &str, status: &str) -> Value {
    eventually(
        30,
        || campaign(app, p, cid),
        |c: &Value| c["status"] == status,
    )
}

/// Polls the campaign's stats (up to 30 s) until `done` holds; the last stats.
pub fn stats_when(app: &TestApp, p: &Project, cid: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(30, || stats(app, p, cid), done)
}

/// Sends the campaign now and waits until it is SENT and its stats show `expected`
/// emails accepted by the relay and none left in the outbox; the messages the relay got,
/// and the stats.
pub fn send_and_settle(
    app: &TestApp,
    p: &Project,
    smtp: &SmtpServer,
    cid: &str,
    expected: u64,
) -> (Vec<Received>, Value) {
    let c = data(&send(app, p, cid, json!({})), 200);
    assert!(
        c["status"] == "SENDING" || c["status"] == "SENT",
        "sending starts now: {c}"
    );
    let c = campaign_when(app, p, cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    assert!(c["sentAt"].is_string(), "{c}");
    let s = stats_when(app, p, cid, |s: &Value| {
        count(s, "delivered") >= expected && count(s, "queued") == 0
    });
    let got = smtp.wait_for(expected as usize, wait());
    assert!(
        got.len() >= expected as usize,
        "{} of {expected} emails arrived",
        got.len()
    );
    (got, s)
}

/// `n` addresses `{prefix}{i}@example.com`.
pub fn emails(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}@example.com")).collect()
}

/// Upserts each address as a contact with this subscription, eight requests at a time.
pub fn contacts(app: &TestApp, p: &Project, emails: &[String], subscribed: bool) {
    let per_thread = emails.len().div_ceil(8).max(1);
    std::thread::scope(|s| {
        for chunk in emails.chunks(per_thread) {
            s.spawn(move || {
                for email in chunk {
                    app.upsert(&p.secret, json!({"email": email, "subscribed": subscribed}));
                }
            });
        }
    });
}

/// Two subscribed contacts and one unsubscribed for each of the plans "pro" and "free",
/// and a subscribed "team" contact.
pub fn planned_contacts(app: &TestApp, p: &Project) {
    for (email, plan, subscribed) in [
        ("pro0@example.com", "pro", true),
        ("pro1@example.com", "pro", true),
        ("pro-out@example.com", "pro", false),
        ("free0@example.com", "free", true),
        ("free1@example.com", "free", true),
        ("free-out@example.com", "free", false),
        ("team0@example.com", "team", true),
    ] {
        app.upsert(
            &p.secret,
            json!({"email": email, "subscribed": subscribed, "data": {"plan": plan}}),
        );
    }
}

/// The segment filter "data.plan equals `plan`".
pub fn plan_is(plan: &str) -> Value {
    json!({"operator": "AND", "conditions": [{"field": "data.plan", "operator": "equals", "value": plan}]})
}

/// The contact of `email`, as the API shows it.
pub fn contact_of(app: &TestApp, p: &Project, email: &str) -> Value {
    let list = app
        .get(&format!("/contacts?search={email}"), &p.secret)
        .json();
    list["contacts"][0].clone()
}

/// The recipients of the messages, one entry per message, sorted.
pub fn rcpts(got: &[Received]) -> Vec<String> {
    let mut out: Vec<String> = got.iter().map(|m| m.rcpt_to.join(",")).collect();
    out.sort();
    out
}

/// How many messages each recipient got.
pub fn tally(got: &[Received]) -> BTreeMap<String, usize> {
    let mut copies = BTreeMap::new();
    for m in got {
        *copies.entry(m.rcpt_to.join(",")).or_insert(0) += 1;
    }
    copies
}

/// Messages to anyone but the control addresses.
pub fn campaign_mail(smtp: &SmtpServer) -> usize {
    smtp.received()
        .iter()
        .filter(|m| m.rcpt_to.iter().all(|r| !r.starts_with("control")))
        .count()
}

/// Sends one email to `to` through /v1/send and waits until the relay has it: a control
/// that whatever was due before it had its turn, instead of a sleep.
pub fn control(app: &TestApp, p: &Project, smtp: &SmtpServer, to: &str) {
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": FROM, "subject": "control", "body": "control"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let arrived = |got: &Vec<Received>| got.iter().any(|m| m.rcpt_to.iter().any(|r| r == to));
    let got = eventually(30, || smtp.received(), arrived);
    assert!(arrived(&got), "the control email to {to} arrived");
}

/// The server's clock now (it may have been moved ahead of the real one).
pub fn server_now(app: &TestApp) -> DateTime<Utc> {
    let r = app.post("/admin/clock/advance", ADMIN_TOKEN, json!({"ms": 0}));
    assert_eq!(r.status, 200, "{}", r.text);
    let now = r.json()["now"].as_str().expect("now").to_owned();
    DateTime::parse_from_rfc3339(&now)
        .expect("an ISO 8601 time")
        .with_timezone(&Utc)
}

/// Moves the server's clock forward.
pub fn advance(app: &TestApp, ms: i64) {
    let r = app.post("/admin/clock/advance", ADMIN_TOKEN, json!({ "ms": ms }));
    assert_eq!(r.status, 200, "{}", r.text);
}

/// ISO 8601 UTC with milliseconds and a `Z`, as the API writes times.
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn assert_conflict(r: &Resp, status: &str) {
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "CONFLICT"),
        "{}",
        r.text
    );
    let message = r.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains(status),
        "the message names the status {status}: {message}"
    );
}

/// A header's value, with folded continuation lines joined.
pub fn header_of(raw: &str, name: &str) -> Option<String> {
    let prefix = format!("{}:", name.to_ascii_lowercase());
    let mut lines = raw
        .lines()
        .skip_while(|l| !l.to_ascii_lowercase().starts_with(&prefix));
    let first = lines.next()?;
    let mut value = first[prefix.len()..].trim().to_owned();
    for cont in lines.take_while(|l| l.starts_with(' ') || l.starts_with('\t')) {
        value.push(' ');
        value.push_str(cont.trim());
    }
    Some(value)
}

/// The HTML part of a message, its transfer encoding undone and its lines ending in `\n`.
pub fn html_of(raw: &str) -> String {
    part_of(raw, |m| m.body_html(0)).replace("\r\n", "\n")
}

/// The text/plain part of a message, its transfer encoding undone and its lines ending
/// in `\n`.
pub fn text_of(raw: &str) -> String {
    part_of(raw, |m| m.body_text(0)).replace("\r\n", "\n")
}

pub fn part_of(
    raw: &str,
    pick: impl for<'a> Fn(&'a mail_parser::Message<'a>) -> Option<std::borrow::Cow<'a, str>>,
) -> String {
    let message = mail_parser::MessageParser::default()
        .parse(raw.as_bytes())
        .unwrap_or_else(|| panic!("a MIME message: {raw}"));
    pick(&message)
        .unwrap_or_else(|| panic!("the part is there: {raw}"))
        .into_owned()
}

/// The path of the first link in `text` that contains `marker` (such as "/unsubscribe/"),
/// from the marker on: links point at `server.public_url`, not at the test server, so the
/// tests ask the test server for the path.
pub fn link_path(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)?..];
    let end = rest
        .find(|c: char| c.is_whitespace() || "\"'<>&".contains(c))
        .unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

/// `path` with one character of its token (the last segment) changed.
pub fn tampered(path: &str) -> String {
    let (head, token) = path.rsplit_once('/').expect("a path with a token");
    let mut chars: Vec<char> = token.chars().collect();
    let half = chars.len() / 2;
    let at = (half..chars.len())
        .chain(0..half)
        .find(|&i| chars[i].is_ascii_alphanumeric())
        .expect("a token with a letter or digit");
    chars[at] = if chars[at] == 'x' { 'y' } else { 'x' };
    format!("{head}/{}", chars.into_iter().collect::<String>())
}

/// The id of the email a message carries: the local part of its Message-ID.
pub fn email_id_of(raw: &str) -> String {
    let message_id = header_of(raw, "Message-ID").expect("a Message-ID");
    message_id
        .trim_start_matches('<')
        .split('@')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A request with no key that does not follow redirects (the helpers' agent follows
/// them): what a mail client or a browser sends to an unsubscribe or tracking link.
pub fn visit(app: &TestApp, method: &str, path: &str, form: Option<&str>) -> Resp {
    let agent = ureq::AgentBuilder::new()
        .redirects(0)
        .timeout(Duration::from_secs(30))
        .build();
    let req = agent.request(method, &format!("{}{}", app.base, path));
    let result = match form {
        Some(f) => req
            .set("Content-Type", "application/x-www-form-urlencoded")
            .send_string(f),
        None => req.call(),
    };
    Resp::of(method, path, result)
}

/// The email record (GET /emails/{id}).
pub fn email_record(app: &TestApp, p: &Project, email: &str) -> Value {
    data(&app.get(&format!("/emails/{email}"), &p.secret), 200)
}
