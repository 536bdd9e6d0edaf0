//! The links in campaign mail once the operator has acted on the project: disabled, its
//! keys rotated. Mail goes through the testkit's real SMTP server; the links are taken
//! from the messages it received.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use mailroom_testkit::SmtpServer;
use serde_json::{json, Value};
use std::time::Duration;

use crate::campaigns::{
    advance, contact_of, contacts, count, create, email_id_of, email_record, eventually, header_of,
    html_of, id, link_path, rig, send_and_settle, visit,
};
use crate::helpers::{Project, Resp, TestApp, ADMIN_TOKEN};

const DAY_MS: i64 = 86_400_000;
/// `links.unsubscribe_valid_days` as config/default.toml sets it.
const UNSUBSCRIBE_VALID_DAYS: i64 = 60;
/// A target whose query needs escaping in HTML: the template writes it escaped, and the
/// reader's browser (and so the redirect) sees `https://example.com/x?a=1&b="2"`.
const TARGET_IN_HTML: &str = "https://example.com/x?a=1&amp;b=&quot;2&quot;";

/// The links of one campaign email.
struct Mail {
    email: String,
    unsubscribe: String,
    open: String,
    click: String,
}

/// Sends a campaign with one link to the project's subscribed contacts and answers the
/// links of the mail each got, by recipient.
fn campaign_links(app: &TestApp, p: &Project, smtp: &SmtpServer, n: usize) -> Vec<(String, Mail)> {
    let body = format!("<p>Hi</p><a href=\"{TARGET_IN_HTML}\">x</a>");
    let cid = id(&create(app, p, json!({ "body": body })));
    let before = smtp.received().len();
    send_and_settle(app, p, smtp, &cid, n as u64);
    smtp.wait_for(before + n, Duration::from_secs(20))[before..]
        .iter()
        .map(|m| {
            let raw = m.text();
            let html = html_of(&raw);
            let list = header_of(&raw, "List-Unsubscribe").expect("a List-Unsubscribe header");
            let link = |text: &str, marker: &str| {
                link_path(text, marker).unwrap_or_else(|| panic!("a {marker} link: {html}"))
            };
            let mail = Mail {
                email: email_id_of(&raw),
                unsubscribe: link(&list, "/unsubscribe/"),
                open: link(&html, "/t/o/"),
                click: link(&html, "/t/c/"),
            };
            (m.rcpt_to.join(","), mail)
        })
        .collect()
}

fn admin(app: &TestApp, p: &Project, action: &str) -> Value {
    let path = format!("/admin/projects/{}/{action}", p.id);
    let r = app.request("POST", &path, Some(ADMIN_TOKEN), None);
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()
}

fn is_html(r: &Resp) -> bool {
    r.header("content-type")
        .unwrap_or_default()
        .starts_with("text/html")
}

fn is_gif(r: &Resp) -> bool {
    r.header("content-type")
        .unwrap_or_default()
        .starts_with("image/gif")
}

/// A click link that no longer redirects: a page naming its target, escaped, for the
/// reader to follow or not.
fn assert_shows_the_target_without_redirecting(r: &Resp) {
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("location"), None, "no redirect");
    assert!(is_html(r), "{:?}", r.headers);
    assert!(
        r.text.contains(&format!("href=\"{TARGET_IN_HTML}\"")),
        "a link to the target, escaped: {}",
        r.text
    );
    assert!(!r.text.contains("b=\"2\""), "nothing unescaped: {}", r.text);
}

fn unsubscribe(app: &TestApp, path: &str) -> Resp {
    visit(app, "POST", path, Some("List-Unsubscribe=One-Click"))
}

#[test]
fn a_disabled_projects_click_link_shows_its_target_and_its_pixel_records_nothing_while_its_unsubscribe_link_works(
) {
    let (_dns, smtp, app, p) = rig(&[]);
    contacts(&app, &p, &["ada@example.com".to_owned()], true);
    let (_, mail) = campaign_links(&app, &p, &smtp, 1).remove(0);

    admin(&app, &p, "disable");
    assert_shows_the_target_without_redirecting(&visit(&app, "GET", &mail.click, None));
    let pixel = visit(&app, "GET", &mail.open, None);
    assert_eq!(pixel.status, 200);
    assert!(
        is_gif(&pixel),
        "the pixel still answers: {:?}",
        pixel.headers
    );
    let r = unsubscribe(&app, &mail.unsubscribe);
    assert_eq!(r.status, 200, "{}", r.text);

    // The project's key works again once it is enabled, to look at what was recorded:
    // each hit above answered only after its recording (if any) was done.
    admin(&app, &p, "enable");
    let e = email_record(&app, &p, &mail.email);
    assert_eq!((count(&e, "opens"), count(&e, "clicks")), (0, 0), "{e}");
    let clicks = app.get("/events?name=email.click", &p.secret).json();
    assert_eq!(clicks["total"], 0, "{clicks}");
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);

    // The same link redirects again, and counts, once the project is enabled.
    let r = visit(&app, "GET", &mail.click, None);
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(
        r.header("location"),
        Some("https://example.com/x?a=1&b=\"2\"")
    );
    let e = eventually(
        10,
        || email_record(&app, &p, &mail.email),
        |e| count(e, "clicks") == 1,
    );
    assert_eq!(count(&e, "clicks"), 1, "{e}");
}

#[test]
fn after_rotate_keys_old_clicks_stop_and_old_unsubscribe_links_work_until_their_days_run_out() {
    let (_dns, smtp, app, p) = rig(&[]);
    let people = ["ada@example.com".to_owned(), "bob@example.com".to_owned()];
    contacts(&app, &p, &people, true);
    let mut old = campaign_links(&app, &p, &smtp, 2);
    old.sort_by(|a, b| a.0.cmp(&b.0));
    let (ada, bob) = (&old[0].1, &old[1].1);

    let keys = admin(&app, &p, "rotate-keys");
    let p = Project {
        id: p.id.clone(),
        secret: keys["secretKey"]
            .as_str()
            .expect("a new secret key")
            .to_owned(),
        public: keys["publicKey"].as_str().unwrap_or_default().to_owned(),
    };
    assert_shows_the_target_without_redirecting(&visit(&app, "GET", &ada.click, None));
    assert!(is_gif(&visit(&app, "GET", &ada.open, None)));
    let e = email_record(&app, &p, &ada.email);
    assert_eq!((count(&e, "opens"), count(&e, "clicks")), (0, 0), "{e}");

    // Within its days an old unsubscribe link still unsubscribes.
    advance(&app, (UNSUBSCRIBE_VALID_DAYS - 1) * DAY_MS);
    let r = unsubscribe(&app, &ada.unsubscribe);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);

    // Mail sent after the rotation has links that work.
    let new = campaign_links(&app, &p, &smtp, 1).remove(0).1;
    let r = visit(&app, "GET", &new.click, None);
    assert_eq!(r.status, 302, "{}", r.text);

    // Past its days, an old one has expired; a new one has not.
    advance(&app, 2 * DAY_MS + 1);
    for method in ["GET", "POST"] {
        let r = visit(
            &app,
            method,
            &bob.unsubscribe,
            Some("List-Unsubscribe=One-Click"),
        );
        assert_eq!(r.status, 404, "{method}: {}", r.text);
        assert!(r.text.contains("expired"), "{method}: {}", r.text);
    }
    assert_eq!(contact_of(&app, &p, "bob@example.com")["subscribed"], true);
    let r = unsubscribe(&app, &new.unsubscribe);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(contact_of(&app, &p, "bob@example.com")["subscribed"], false);
}

#[test]
fn a_link_token_shows_no_id_in_clear_text() {
    let (_dns, smtp, app, p) = rig(&[]);
    contacts(&app, &p, &["ada@example.com".to_owned()], true);
    let cid = id(&create(
        &app,
        &p,
        json!({"body": "<a href=\"https://example.com/x\">x</a>"}),
    ));
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 1);
    let raw = got[0].text();
    let html = html_of(&raw);
    let contact = contact_of(&app, &p, "ada@example.com");
    let ids: Vec<[u8; 16]> = [
        p.id.as_str(),
        contact["id"].as_str().expect("a contact id"),
        &email_id_of(&raw),
        &cid,
    ]
    .iter()
    .map(|s| *uuid::Uuid::parse_str(s).expect("a uuid").as_bytes())
    .collect();
    let list = header_of(&raw, "List-Unsubscribe").expect("a List-Unsubscribe header");
    for (text, marker) in [(&list, "/unsubscribe/"), (&html, "/t/o/"), (&html, "/t/c/")] {
        let path = link_path(text, marker).unwrap_or_else(|| panic!("a {marker} link"));
        let token = path.rsplit('/').next().unwrap_or_default();
        let bytes = URL_SAFE_NO_PAD.decode(token).expect("base64url");
        for id in &ids {
            // Eight bytes in a row of an id would already give it away.
            assert!(
                !bytes.windows(8).any(|w| id.windows(8).any(|i| i == w)),
                "{marker} token {token} shows an id"
            );
        }
        assert!(
            !String::from_utf8_lossy(&bytes).contains("example.com"),
            "{marker} token {token} shows the target"
        );
    }
}

#[test]
fn an_unsubscribe_window_shorter_than_the_laws_30_days_stops_start_up_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = std::process::Command::new(crate::helpers::bin())
        .args(["serve", "--config"])
        .arg(crate::helpers::test_config())
        .env("MAILROOM__STORAGE__PATH", dir.path())
        .env("MAILROOM__LINKS__UNSUBSCRIBE_VALID_DAYS", "29")
        .output()
        .expect("run mailroom");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("links.unsubscribe_valid_days") && stderr.contains("at least 30"),
        "{stderr}"
    );
}
