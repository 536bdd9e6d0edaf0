//! Mail that reaches the inbox: every email carries a text/plain alternative and its HTML
//! as a whole document, and SpamAssassin (run locally, no network) finds nothing in a
//! transactional, a tracked campaign or a workflow email that counts against it.

use std::io::Write;
use std::process::{Command, Stdio};

use mailroom_testkit::{Received, SmtpServer};
use serde_json::{json, Value};

use crate::support::app::{Project, TestApp};
use crate::support::campaign::{eventually, header_of, html_of, id, rig, text_of};

const FROM: &str = "hello@acme.test";

/// Rules that speak of how the test delivered the message or of the machine, not of the
/// message: none of them is in what a real receiver would see.
const NOT_ABOUT_THE_MESSAGE: &[&str] = &[
    // Captured straight from our SMTP client, so no relay added a Received header.
    "NO_RECEIVED",
    "NO_RELAYS",
    // `-L` does no DNS, so the DKIM signature cannot be checked against acme.test's key
    // (the delivery tests verify it against the test DNS server).
    "DKIM_SIGNED",
    "DKIM_INVALID",
    "DKIM_VALID",
    "DKIM_VALID_AU",
    "DKIM_VALID_EF",
    // The test domain `acme.test` is not a registered domain, and `127.0.0.1` (the
    // tests' server.public_url) is a numeric link host.
    "RDNS_NONE",
    "NUMERIC_HTTP_ADDR",
    "HTTP_ESCAPED_HOST",
];

/// Rules the message itself must never match: HTML-only mail, HTML without an `<html>`
/// tag, or HTML that is mostly images.
fn is_forbidden(rule: &str) -> bool {
    rule == "MIME_HTML_ONLY"
        || rule == "HTML_MIME_NO_HTML_TAG"
        || rule.starts_with("HTML_IMAGE_ONLY")
}

/// What SpamAssassin says of a message: each rule it matched with its points.
struct Report {
    rules: Vec<(String, f64)>,
    text: String,
}

impl Report {
    /// The points of the rules that are about the message.
    fn score(&self) -> f64 {
        self.rules
            .iter()
            .filter(|(r, _)| !NOT_ABOUT_THE_MESSAGE.contains(&r.as_str()))
            .map(|(_, p)| p)
            .sum()
    }
}

/// Whether this machine can run SpamAssassin. In CI it must (.ci/run installs it);
/// elsewhere a missing one skips the test, loudly.
fn spamassassin_here() -> bool {
    let found = Command::new("spamassassin")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "spamassassin is not installed, and CI needs it (.ci/run installs it)"
        );
        mailroom_testkit::skipped(
            "spamassassin is not installed; `apt-get install spamassassin` to run the deliverability test",
        );
    }
    found
}

/// `spamassassin -L -t` (local tests only, a report of every rule) on `raw`.
fn spam_report(raw: &[u8], prefs: &std::path::Path) -> Report {
    let mut child = Command::new("spamassassin")
        .args(["-L", "-t", "-p"])
        .arg(prefs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start spamassassin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(raw)
        .expect("write the message");
    let out = child.wait_with_output().expect("spamassassin's report");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let details = text
        .split("Content analysis details:")
        .nth(1)
        .unwrap_or_else(|| panic!("a report: {text}"));
    let rules = details
        .lines()
        .skip_while(|l| !l.starts_with("----"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let points: f64 = words.next()?.parse().ok()?;
            let rule = words.next()?;
            rule.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                .then(|| (rule.to_owned(), points))
        })
        .collect();
    Report { rules, text }
}

fn the_mail(smtp: &SmtpServer, subject: &str) -> Received {
    let got = eventually(
        30,
        || smtp.received(),
        |got: &Vec<Received>| {
            got.iter()
                .any(|m| header_of(&m.text(), "Subject").as_deref() == Some(subject))
        },
    );
    got.into_iter()
        .find(|m| header_of(&m.text(), "Subject").as_deref() == Some(subject))
        .unwrap_or_else(|| panic!("no email \"{subject}\" arrived"))
}

fn created(app: &TestApp, p: &Project, path: &str, body: Value) -> Value {
    let r = app.post(path, &p.secret, body);
    assert!(r.status == 200 || r.status == 201, "{path}: {}", r.text);
    let v = r.json();
    if v["data"].is_object() {
        v["data"].clone()
    } else {
        v
    }
}

const RECEIPT: &str = "<h1>Thanks for your order, {{name ?? \"there\"}}</h1>\
    <p>We received your payment of $42.00 for order 1042 on 12 March. The order ships \
    from our warehouse within two working days, and we will write again with the \
    tracking number when it leaves.</p>\
    <p>You can see the order, change the delivery address or download the invoice on \
    <a href=\"https://acme.test/orders/1042\">your order page</a>.</p>\
    <p>Questions? Reply to this email and a person will answer.</p><p>The Acme team</p>";

const NEWSLETTER: &str = "<h1>What is new at Acme in March</h1>\
    <p>Hi {{data.first ?? \"there\"}}, spring is here and so are three things we have \
    been working on all winter.</p>\
    <h2>Shared folders</h2><p>You can now share a folder with your whole team. Everyone \
    sees the same files, and changes show up for the others within seconds. Open a \
    folder and choose Share to try it.</p>\
    <h2>Faster search</h2><p>Search now looks inside documents and answers in under a \
    second, even in accounts with a hundred thousand files.</p>\
    <h2>A new mobile app</h2><p>The app for phones was rebuilt from scratch: it starts \
    twice as fast and works offline. Update it from your app store.</p>\
    <p>Read the whole story on <a href=\"https://acme.test/blog/march\">our blog</a>, \
    and tell us what you think: every reply is read by someone on the team.</p>\
    <p>See you next month,<br>Ada from Acme</p>";

#[test]
fn every_email_has_a_text_alternative_first_and_its_html_as_a_document() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "Receipt",
               "body": RECEIPT, "data": {"name": "Ada"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let raw = the_mail(&smtp, "Receipt").text();
    let content_type = header_of(&raw, "Content-Type").unwrap_or_default();
    assert!(content_type.starts_with("multipart/alternative"), "{raw}");
    let plain_at = raw
        .find("Content-Type: text/plain")
        .expect("a text/plain part");
    let html_at = raw
        .find("Content-Type: text/html")
        .expect("a text/html part");
    assert!(plain_at < html_at, "text/plain comes first: {raw}");
    let text = text_of(&raw);
    assert!(
        text.starts_with("Thanks for your order, Ada\n\nWe received your payment"),
        "{text}"
    );
    assert!(
        text.contains("your order page (https://acme.test/orders/1042)"),
        "the link keeps its target: {text}"
    );
    assert!(!text.contains('<'), "no tags in the text: {text}");
    let html = html_of(&raw);
    assert!(
        html.starts_with("<!DOCTYPE html>\n<html") && html.contains("<meta charset=\"utf-8\">"),
        "{html}"
    );
    assert!(
        html.contains("<body>\n<h1>Thanks for your order, Ada</h1>"),
        "{html}"
    );

    // With an attachment, the alternative goes inside multipart/mixed.
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "Invoice", "body": RECEIPT,
               "attachments": [{"filename": "invoice.txt", "content": "aGVsbG8=", "contentType": "text/plain"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let raw = the_mail(&smtp, "Invoice").text();
    let content_type = header_of(&raw, "Content-Type").unwrap_or_default();
    assert!(content_type.starts_with("multipart/mixed"), "{raw}");
    assert!(raw.contains("multipart/alternative"), "{raw}");
    assert!(text_of(&raw).contains("Thanks for your order"), "{raw}");
}

#[test]
fn a_send_with_its_own_text_has_exactly_that_text_rendered_as_its_text_part() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "Own text",
               "body": RECEIPT, "data": {"name": "Ada & <co>", "plan": "pro"},
               "text": "Hi {{name}},\n\nYour plan: {{ data.plan }}{{ missing }}."}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let raw = the_mail(&smtp, "Own text").text();
    assert_eq!(
        text_of(&raw),
        "Hi Ada & <co>,\n\nYour plan: pro.",
        "rendered with the body's variables and not escaped: {raw}"
    );
    assert!(
        html_of(&raw).contains("Thanks for your order, Ada &amp; &lt;co&gt;"),
        "the HTML is still the body's, escaped: {raw}"
    );

    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": FROM, "subject": "s", "body": "b",
               "text": "{{ broken"}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.json()["error"]["errors"][0]["field"],
        "text",
        "{}",
        r.text
    );
}

#[test]
fn a_templates_text_is_its_emails_text_part_unless_the_send_gives_its_own() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let t = created(
        &app,
        &p,
        "/templates",
        json!({"name": "Receipt", "subject": "{{ subject }}", "body": RECEIPT, "from": FROM,
               "text": "Thanks, {{name ?? \"there\"}} & co"}),
    );
    assert_eq!(t["text"], "Thanks, {{name ?? \"there\"}} & co", "{t}");
    let tid = t["id"].as_str().unwrap().to_owned();
    let send = |subject: &str, extra: Value| {
        let mut body = json!({"to": "ada@example.com", "template": tid,
                              "data": {"name": "Ada", "subject": subject}});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = app.post("/v1/send", &p.secret, body);
        assert_eq!(r.status, 200, "{}", r.text);
        text_of(&the_mail(&smtp, subject).text())
    };
    assert_eq!(send("Stored text", json!({})), "Thanks, Ada & co");
    assert_eq!(
        send("Given text", json!({"text": "Given to {{name}}"})),
        "Given to Ada"
    );

    let r = app.patch(
        &format!("/templates/{tid}"),
        &p.secret,
        json!({"text": "Patched for {{name}}"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["text"], "Patched for {{name}}", "{}", r.text);
    let got = app.get(&format!("/templates/{tid}"), &p.secret).json();
    assert_eq!(got["text"], "Patched for {{name}}", "{got}");
    assert_eq!(send("Patched text", json!({})), "Patched for Ada");

    let r = app.patch(
        &format!("/templates/{tid}"),
        &p.secret,
        json!({"text": "{% if %}"}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.json()["error"]["errors"][0]["field"],
        "text",
        "{}",
        r.text
    );
}

#[test]
fn a_tracked_campaign_email_has_its_open_pixel_inside_the_body_and_a_text_part_with_its_links() {
    let (_dns, smtp, app, p) = rig(|_| {});
    app.upsert(
        &p.secret,
        json!({"email": "ada@example.com", "subscribed": true}),
    );
    let c = created(
        &app,
        &p,
        "/campaigns",
        json!({"name": "March", "subject": "March news", "body": NEWSLETTER, "from": FROM,
               "type": "ALL"}),
    );
    created(&app, &p, &format!("/campaigns/{}/send", id(&c)), json!({}));
    let raw = the_mail(&smtp, "March news").text();
    let html = html_of(&raw);
    let body = html.split("<body>").nth(1).expect("a body");
    let pixel = body.find("/t/o/").expect("an open pixel");
    assert!(
        pixel < body.find("</body>").expect("a closed body"),
        "{html}"
    );
    let text = text_of(&raw);
    assert!(text.contains("our blog (http"), "{text}");
    assert!(text.contains("Unsubscribe (http"), "{text}");
    assert!(!text.contains("/t/o/"), "the pixel is not text: {text}");
}

#[test]
fn spamassassin_finds_nothing_in_a_transactional_a_tracked_campaign_or_a_workflow_email() {
    if !spamassassin_here() {
        return;
    }
    let (_dns, smtp, app, p) = rig(|_| {});
    let prefs = tempfile::tempdir().expect("a temp dir");
    let prefs = prefs.path().join("user_prefs");

    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": {"name": "Ada Lovelace", "email": "ada@example.com"},
               "from": {"name": "Acme", "email": FROM}, "subject": "Your receipt for order 1042",
               "body": RECEIPT, "data": {"name": "Ada"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text);

    app.upsert(
        &p.secret,
        json!({"email": "grace@example.com", "subscribed": true, "data": {"first": "Grace"}}),
    );
    let c = created(
        &app,
        &p,
        "/campaigns",
        json!({"name": "March", "subject": "What is new at Acme in March", "body": NEWSLETTER,
               "from": FROM, "type": "ALL"}),
    );
    created(&app, &p, &format!("/campaigns/{}/send", id(&c)), json!({}));
    // A tracked campaign of one line: its HTML is the document, the footer and the pixel.
    let short = created(
        &app,
        &p,
        "/campaigns",
        json!({"name": "Short", "subject": "A short note from Acme", "body": "<p>Our news.</p>",
               "from": FROM, "audienceType": "ALL"}),
    );
    created(
        &app,
        &p,
        &format!("/campaigns/{}/send", id(&short)),
        json!({}),
    );

    let t = created(
        &app,
        &p,
        "/templates",
        json!({"name": "Welcome", "subject": "Welcome to Acme", "type": "TRANSACTIONAL",
               "from": FROM, "body": "<h1>Welcome to Acme</h1><p>Your account is ready. \
               Start by creating a folder and inviting the people you work with: they get \
               an email with a link, and the folder is shared as soon as they accept.</p>\
               <p>The <a href=\"https://acme.test/guide\">getting started guide</a> walks \
               through the rest in five minutes.</p><p>The Acme team</p>"}),
    );
    created(
        &app,
        &p,
        "/workflows",
        json!({"name": "Onboarding", "enabled": true, "triggerEvent": "signup",
               "steps": [{"id": "welcome", "type": "SEND_EMAIL",
                          "config": {"templateId": id(&t)}, "next": null}]}),
    );
    let r = app.post(
        "/v1/track",
        &p.secret,
        json!({"email": "linus@example.com", "event": "signup"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);

    // The control: a report that did not parse would score 0 and pass every check
    // below, so the standard test message must score as the spam it is.
    let gtube = b"From: hello@acme.test\r\nTo: ada@example.com\r\nSubject: control\r\n\r\n\
        XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X\r\n";
    let control = spam_report(gtube, &prefs);
    assert!(
        control.rules.iter().any(|(r, _)| r == "GTUBE") && control.score() >= 100.0,
        "GTUBE must be read as spam, or the scores below mean nothing: {}",
        control.text
    );
    let mut failures = Vec::new();
    for (kind, subject) in [
        ("transactional", "Your receipt for order 1042"),
        ("tracked campaign", "What is new at Acme in March"),
        ("short tracked campaign", "A short note from Acme"),
        ("workflow", "Welcome to Acme"),
    ] {
        let mail = the_mail(&smtp, subject);
        if kind.ends_with("tracked campaign") {
            assert!(mail.text().contains("/t/o/"), "the campaign is tracked");
        }
        let report = spam_report(&mail.data, &prefs);
        let rules: Vec<String> = report
            .rules
            .iter()
            .map(|(r, p)| format!("{r} {p}"))
            .collect();
        eprintln!("{kind}: {:.1} points, {}", report.score(), rules.join(", "));
        let forbidden: Vec<&String> = report
            .rules
            .iter()
            .map(|(r, _)| r)
            .filter(|r| is_forbidden(r))
            .collect();
        if !forbidden.is_empty() || report.score() > 0.1 {
            failures.push(format!(
                "{kind}: {:.1} points, matched {forbidden:?}\n{}",
                report.score(),
                report.text
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
