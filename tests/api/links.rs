//! The links in campaign mail once the operator has acted on the project: disabled, its
//! keys rotated; and the pages an unsubscribe link shows a recipient (who sends, to
//! which address, and the way back). Mail goes through the testkit's real SMTP server;
//! the links are taken from the messages it received.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use mailroom_testkit::SmtpServer;
use serde_json::{json, Value};
use std::time::Duration;

use crate::support::app::{Project, Resp, TestApp, ADMIN_TOKEN};
use crate::support::campaign::{
    advance, contact_of, contacts, count, create, email_id_of, email_record, eventually, header_of,
    html_of, id, link_path, rig, send_and_settle, stats, visit,
};

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
    let (_dns, smtp, app, p) = rig(|_| {});
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
    let (_dns, smtp, app, p) = rig(|_| {});
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
    let (_dns, smtp, app, p) = rig(|_| {});
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
    let stderr = crate::support::app::refused_start(|s| s.links.unsubscribe_valid_days = 29);
    assert!(
        stderr.contains("links.unsubscribe_valid_days") && stderr.contains("at least 30"),
        "{stderr}"
    );
}

/// The CSP of every page a recipient sees.
const PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

/// A campaign with `fields` sent to each of `to` (subscribed); each recipient's
/// unsubscribe path, in the order of `to`, and the campaign's id.
pub(crate) fn unsubscribe_paths(
    app: &TestApp,
    p: &Project,
    smtp: &SmtpServer,
    to: &[&str],
    fields: Value,
) -> (Vec<String>, String) {
    let to: Vec<String> = to.iter().map(|s| (*s).to_owned()).collect();
    contacts(app, p, &to, true);
    let cid = id(&create(app, p, fields));
    let (got, _) = send_and_settle(app, p, smtp, &cid, to.len() as u64);
    let paths = to
        .iter()
        .map(|address| {
            let m = got
                .iter()
                .find(|m| m.rcpt_to.iter().any(|r| r == address))
                .unwrap_or_else(|| panic!("a message to {address}"));
            let list = header_of(&m.text(), "List-Unsubscribe").expect("List-Unsubscribe");
            link_path(&list, "/unsubscribe/").expect("an unsubscribe URL")
        })
        .collect();
    (paths, cid)
}

fn events_named(app: &TestApp, p: &Project, name: &str) -> Value {
    app.get(&format!("/events?name={name}"), &p.secret).json()
}

#[test]
fn the_unsubscribe_page_names_the_sender_and_a_masked_address_under_a_strict_csp() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let (paths, _) = unsubscribe_paths(
        &app,
        &p,
        &smtp,
        &["ada@example.com"],
        json!({"fromName": "Acme News"}),
    );
    let page = visit(&app, "GET", &paths[0], None);
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text
            .contains("Unsubscribe from Acme News (hello@acme.test)?"),
        "{}",
        page.text
    );
    assert!(page.text.contains("a***@example.com"), "{}", page.text);
    assert!(!page.text.contains("ada@example.com"), "{}", page.text);
    assert!(page.text.contains("<h1>") && page.text.contains("<button type=\"submit\">"));
    assert_eq!(page.header("content-security-policy"), Some(PAGE_CSP));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(
        contact_of(&app, &p, "ada@example.com")["subscribed"],
        true,
        "a GET changes nothing"
    );
}

#[test]
fn a_tenants_from_name_with_html_shows_as_text_on_the_unsubscribe_pages() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let (paths, _) = unsubscribe_paths(
        &app,
        &p,
        &smtp,
        &["ada@example.com"],
        json!({"fromName": "<script>alert(1)</script> & \"Co\""}),
    );
    for (method, form) in [("GET", None), ("POST", Some("List-Unsubscribe=One-Click"))] {
        let page = visit(&app, method, &paths[0], form);
        assert_eq!(page.status, 200, "{}", page.text);
        assert!(!page.text.contains("<script>"), "{method}: {}", page.text);
        assert!(
            page.text
                .contains("&lt;script&gt;alert(1)&lt;&#x2F;script&gt; &amp; &quot;Co&quot;")
                || page
                    .text
                    .contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Co&quot;"),
            "{method}: {}",
            page.text
        );
        assert_eq!(page.header("content-security-policy"), Some(PAGE_CSP));
    }
}

#[test]
fn unsubscribing_then_resubscribing_brings_the_contact_back_with_its_event_and_takes_back_the_campaigns_count(
) {
    let (_dns, smtp, app, p) = rig(|_| {});
    let (paths, cid) = unsubscribe_paths(&app, &p, &smtp, &["ada@example.com"], json!({}));
    let subscribed_before = count(&events_named(&app, &p, "contact.subscribed"), "total");
    let done = visit(&app, "POST", &paths[0], Some("List-Unsubscribe=One-Click"));
    assert_eq!(done.status, 200, "{}", done.text);
    assert!(done.text.contains("You are unsubscribed"), "{}", done.text);
    assert!(
        done.text.contains("/resubscribe\"") && done.text.contains(">Resubscribe<"),
        "{}",
        done.text
    );
    assert_eq!(done.header("content-security-policy"), Some(PAGE_CSP));
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);
    let s = eventually(
        30,
        || stats(&app, &p, &cid),
        |s: &Value| count(s, "unsubscribed") == 1,
    );
    assert_eq!(count(&s, "unsubscribed"), 1, "{s}");

    let back = visit(&app, "POST", &format!("{}/resubscribe", paths[0]), Some(""));
    assert_eq!(back.status, 200, "{}", back.text);
    assert!(back.text.contains("subscribed again"), "{}", back.text);
    assert_eq!(back.header("content-security-policy"), Some(PAGE_CSP));
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], true);
    let events = eventually(
        10,
        || events_named(&app, &p, "contact.subscribed"),
        |e: &Value| count(e, "total") == subscribed_before + 1,
    );
    assert_eq!(count(&events, "total"), subscribed_before + 1, "{events}");
    assert_eq!(events["events"][0]["email"], "ada@example.com", "{events}");
    let s = eventually(
        30,
        || stats(&app, &p, &cid),
        |s: &Value| count(s, "unsubscribed") == 0,
    );
    assert_eq!(
        count(&s, "unsubscribed"),
        0,
        "a resubscribe takes it back: {s}"
    );

    // The link still unsubscribes, and counts again.
    let again = visit(&app, "POST", &paths[0], Some("List-Unsubscribe=One-Click"));
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);
    let s = eventually(
        30,
        || stats(&app, &p, &cid),
        |s: &Value| count(s, "unsubscribed") == 1,
    );
    assert_eq!(count(&s, "unsubscribed"), 1, "{s}");
}

#[test]
fn an_unsubscribe_link_resubscribes_no_one_but_a_contact_it_unsubscribed_itself() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let (paths, _) = unsubscribe_paths(
        &app,
        &p,
        &smtp,
        &["ada@example.com", "bob@example.com"],
        json!({}),
    );
    let (ada, bob) = (&paths[0], &paths[1]);
    let left = visit(&app, "POST", bob, Some("List-Unsubscribe=One-Click"));
    assert_eq!(left.status, 200, "{}", left.text);
    // The tenant unsubscribes Ada itself: her link did not, so it cannot undo it.
    let ada_id = contact_of(&app, &p, "ada@example.com")["id"]
        .as_str()
        .expect("Ada's id")
        .to_owned();
    let r = app.patch(
        &format!("/contacts/{ada_id}"),
        &p.secret,
        json!({"subscribed": false}),
    );
    assert_eq!(r.status, 200, "{}", r.text);

    let refused = visit(&app, "POST", &format!("{ada}/resubscribe"), Some(""));
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);
    assert_eq!(
        contact_of(&app, &p, "bob@example.com")["subscribed"],
        false,
        "Ada's link does not bring Bob back"
    );
    // Only a POST resubscribes, and only with a token this server made.
    assert_eq!(
        visit(&app, "GET", &format!("{bob}/resubscribe"), None).status,
        405
    );
    let forged = format!("{}x/resubscribe", &bob[..bob.len() - 1]);
    assert_eq!(
        visit(&app, "POST", &forged, Some("")).status,
        404,
        "{forged}"
    );
    assert_eq!(contact_of(&app, &p, "bob@example.com")["subscribed"], false);
}

#[test]
fn an_unsubscribe_link_of_one_project_leaves_the_same_address_in_another_project_subscribed() {
    let (_dns, smtp, app, a) = crate::support::campaign::rig(|_| {});
    let b = app.create_project("Other");
    let r = app.request(
        "POST",
        &format!("/admin/projects/{}/domains/trust", b.id),
        Some(crate::support::app::ADMIN_TOKEN),
        Some(r#"{"domain": "acme.test"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    for p in [&a, &b] {
        app.upsert(
            &p.secret,
            json!({"email": "ada@example.com", "subscribed": true}),
        );
    }
    // B's campaign reaches ada; its unsubscribe link is followed.
    let c = app.post(
        "/campaigns",
        &b.secret,
        json!({"name": "B news", "subject": "From B", "body": "<p>B</p>",
               "from": "news@acme.test", "audienceType": "ALL"}),
    );
    assert_eq!(c.status, 201, "{}", c.text);
    let cid = c.json()["data"]["id"].as_str().unwrap().to_owned();
    let r = app.post(&format!("/campaigns/{cid}/send"), &b.secret, json!({}));
    assert_eq!(r.status, 200, "{}", r.text);
    let got = smtp.wait_for(1, std::time::Duration::from_secs(20));
    let html = crate::support::campaign::html_of(&got[0].text());
    let link =
        crate::support::campaign::link_path(&html, "/unsubscribe/").expect("an unsubscribe link");
    let r =
        crate::support::campaign::visit(&app, "POST", &link, Some("List-Unsubscribe=One-Click"));
    assert_eq!(r.status, 200, "{}", r.text);
    let subscribed = |p: &crate::support::app::Project| {
        app.get("/contacts?search=ada@", &p.secret).json()["contacts"][0]["subscribed"].clone()
    };
    assert_eq!(subscribed(&b), false, "B's ada left through B's link");
    assert_eq!(
        subscribed(&a),
        true,
        "A's ada is another contact: untouched"
    );
}
