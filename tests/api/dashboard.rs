//! The dashboard's HTTP rules, without a browser: cookies, CSRF, CSP, tenant scope.
//! (The pages themselves are driven in real Chromium by tests/browser.)

use std::time::Duration;

use crate::support::app::{Resp, TestApp, ADMIN_TOKEN};

/// A client that keeps the dashboard's cookies by hand and does not follow redirects.
pub(crate) struct Visitor<'a> {
    app: &'a TestApp,
    agent: ureq::Agent,
    cookies: Vec<(String, String)>,
}

impl<'a> Visitor<'a> {
    pub(crate) fn new(app: &'a TestApp) -> Self {
        Visitor {
            app,
            agent: ureq::AgentBuilder::new()
                .redirects(0)
                .timeout(Duration::from_secs(30))
                .build(),
            cookies: Vec::new(),
        }
    }

    fn remember(&mut self, r: &Resp) {
        for (name, value) in &r.headers {
            if !name.eq_ignore_ascii_case("set-cookie") {
                continue;
            }
            let pair = value.split(';').next().unwrap_or_default();
            if let Some((k, v)) = pair.split_once('=') {
                self.cookies.retain(|(name, _)| name != k);
                self.cookies.push((k.to_owned(), v.to_owned()));
            }
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub(crate) fn get(&mut self, path: &str) -> Resp {
        let url = format!("{}{path}", self.app.base);
        let r = Resp::of(
            "GET",
            path,
            self.agent
                .get(&url)
                .set("Cookie", &self.cookie_header())
                .call(),
        );
        self.remember(&r);
        r
    }

    pub(crate) fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Resp {
        let url = format!("{}{path}", self.app.base);
        let r = Resp::of(
            "POST",
            path,
            self.agent
                .post(&url)
                .set("Cookie", &self.cookie_header())
                .send_form(form),
        );
        self.remember(&r);
        r
    }

    pub(crate) fn sign_in(&mut self, key: &str) -> Resp {
        let page = self.get("/app/sign-in");
        let token = hidden(&page.text, "csrf");
        self.post("/app/sign-in", &[("csrf", &token), ("key", key)])
    }
}

/// The value of the first hidden field of this name in a page.
pub(crate) fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + marker.len();
    html[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_secret_key_signs_in_with_a_strict_http_only_cookie_and_pages_carry_a_strict_csp() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    let r = v.sign_in(&p.secret);
    assert_eq!(r.status, 303, "{}", r.text);
    assert_eq!(r.header("location"), Some("/app/overview"));
    let cookie = r
        .headers
        .iter()
        .find(|(k, v)| k.eq_ignore_ascii_case("set-cookie") && v.starts_with("mailroom_session="))
        .map(|(_, v)| v.clone())
        .expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/app", "Max-Age=3600"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");

    let page = v.get("/app/overview");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("Acme"));
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(
        !page.text.contains("<script>") && !page.text.contains("style="),
        "no inline script or style"
    );
}

#[test]
fn a_form_posted_without_its_csrf_token_is_refused_and_changes_nothing() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);

    let r = v.post("/app/sign-out", &[]);
    assert_eq!(r.status, 403, "{}", r.text);
    let r = v.post("/app/sign-out", &[("csrf", "0".repeat(64).as_str())]);
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(v.get("/app/overview").status, 200, "still signed in");

    // The sign-in form too: without the token its cookie holds, no session starts.
    let mut fresh = Visitor::new(&app);
    let r = fresh.post("/app/sign-in", &[("key", p.secret.as_str())]);
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(fresh.cookies.iter().all(|(k, _)| k != "mailroom_session"));
}

#[test]
fn without_a_session_every_page_goes_to_the_sign_in_form() {
    let app = TestApp::spawn();
    let mut v = Visitor::new(&app);
    for path in ["/app", "/app/overview", "/app/no-such-page"] {
        let r = v.get(path);
        assert_eq!(r.status, 303, "{path}");
        assert_eq!(r.header("location"), Some("/app/sign-in"), "{path}");
    }
    v.cookies.push(("mailroom_session".into(), "f".repeat(64)));
    assert_eq!(
        v.get("/app/overview").header("location"),
        Some("/app/sign-in")
    );
}

#[test]
fn a_session_ends_when_its_time_is_up_on_the_servers_clock() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    assert_eq!(v.get("/app/overview").status, 200);
    let r = app.post(
        "/admin/clock/advance",
        ADMIN_TOKEN,
        serde_json::json!({ "ms": 60 * 60 * 1000 }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        v.get("/app/overview").header("location"),
        Some("/app/sign-in")
    );
}

#[test]
fn rotating_the_secret_key_ends_the_sessions_it_opened() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let r = app.post(
        &format!("/admin/projects/{}/rotate-keys", p.id),
        ADMIN_TOKEN,
        serde_json::json!({}),
    );
    assert!(r.status < 300, "{} {}", r.status, r.text);
    assert_eq!(
        v.get("/app/overview").header("location"),
        Some("/app/sign-in")
    );
}

#[test]
fn a_public_key_and_a_wrong_key_do_not_sign_in() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    let r = v.sign_in(&p.public);
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(r.text.contains("public key"), "{}", r.text);
    let r = v.sign_in("sk_wrong");
    assert_eq!(r.status, 401);
    assert!(v.cookies.iter().all(|(k, _)| k != "mailroom_session"));
}

#[test]
fn an_admin_session_sees_the_project_it_picked_and_no_other() {
    let app = TestApp::spawn();
    app.create_project("Alpha");
    let b = app.create_project("Beta");
    let mut v = Visitor::new(&app);
    let r = v.sign_in(ADMIN_TOKEN);
    assert_eq!(r.header("location"), Some("/app/projects"));
    assert_eq!(
        v.get("/app/overview").header("location"),
        Some("/app/projects")
    );
    let picker = v.get("/app/projects");
    assert!(picker.text.contains("Alpha") && picker.text.contains("Beta"));
    let csrf = hidden(&picker.text, "csrf");
    let r = v.post("/app/projects", &[("csrf", &csrf), ("project", &b.id)]);
    assert_eq!(r.status, 303, "{}", r.text);
    let page = v.get("/app/overview");
    assert!(page.text.contains("Beta") && !page.text.contains("Alpha"));
}

#[test]
fn a_project_session_reaches_none_of_another_projects_records() {
    let app = TestApp::spawn();
    let a = app.create_project("Alpha");
    let b = app.create_project("Beta");
    let theirs = app.upsert(&b.secret, serde_json::json!({"email": "secret@beta.test"}));
    let id = theirs["id"].as_str().unwrap();
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&a.secret).status, 303);
    let page = v.get(&format!("/app/contacts/{id}"));
    assert_eq!(page.status, 404, "{}", page.text);
    assert!(!page.text.contains("secret@beta.test"));
    let csrf = hidden(&v.get("/app/contacts").text, "csrf");
    let r = v.post(&format!("/app/contacts/{id}/delete"), &[("csrf", &csrf)]);
    assert_eq!(r.status, 404, "{}", r.text);
    assert_eq!(
        app.get(&format!("/contacts/{id}"), &b.secret).status,
        200,
        "still there"
    );
    let export = v.get("/app/contacts/export");
    assert_eq!(export.status, 200);
    assert!(!export.text.contains("secret@beta.test"), "{}", export.text);
}

#[test]
fn without_script_the_segment_count_and_the_template_preview_come_back_as_pages() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(
        &p.secret,
        serde_json::json!({"email": "ada@example.com", "data": {"plan": "pro", "first": "Ada"}}),
    );
    app.upsert(
        &p.secret,
        serde_json::json!({"email": "bob@example.com", "data": {"plan": "free"}}),
    );
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let csrf = hidden(&v.get("/app/segments").text, "csrf");
    let r = v.post(
        "/app/segments/preview",
        &[
            ("csrf", &csrf),
            ("name", "Pro"),
            ("match_", "AND"),
            ("field0", "data.plan"),
            ("op0", "equals"),
            ("value0", "pro"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text.contains(r#"<strong id="preview-count">1</strong>"#),
        "{}",
        r.text
    );

    let r = v.post(
        "/app/templates/preview",
        &[
            ("csrf", &csrf),
            ("subject", "Hi {{first}}"),
            ("body", "<p>{{plan}}</p>"),
            ("contact", "ada@example.com"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text
            .contains(r#"<strong id="preview-subject">Hi Ada</strong>"#),
        "{}",
        r.text
    );
    assert!(
        r.text.contains("&lt;p&gt;pro&lt;/p&gt;"),
        "the HTML shown as text: {}",
        r.text
    );

    // A bad filter is the API's 422 message, on the page.
    let r = v.post(
        "/app/segments",
        &[
            ("csrf", &csrf),
            ("name", "Bad"),
            ("field0", "data.plan"),
            ("op0", "triggered"),
        ],
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("filters"), "{}", r.text);
}

#[test]
fn the_cookie_is_secure_behind_https_and_the_dashboard_can_be_turned_off() {
    let app = TestApp::spawn();
    let r = app.request_with(
        "GET",
        "/app/sign-in",
        None,
        None,
        &[("X-Forwarded-Proto", "https")],
    );
    let cookie = r.header("set-cookie").unwrap_or_default().to_owned();
    assert!(cookie.contains("; Secure"), "{cookie}");

    let off = TestApp::spawn_with(|s| s.dashboard.enabled = false);
    let r = off.request("GET", "/app/sign-in", None, None);
    assert_eq!(r.status, 404, "{}", r.text);
    assert_eq!(r.code(), "RESOURCE_NOT_FOUND");
}

#[test]
fn editing_a_contact_replaces_its_data_and_subscription_through_the_engine() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let c = app.upsert(
        &p.secret,
        serde_json::json!({"email": "ada@example.com", "data": {"plan": "pro", "old": 1}}),
    );
    let id = c["id"].as_str().unwrap();
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let page = v.get(&format!("/app/contacts/{id}"));
    let csrf = hidden(&page.text, "csrf");
    // The checkbox left out: unsubscribed; `old` left out of the object: removed.
    let r = v.post(
        &format!("/app/contacts/{id}"),
        &[("csrf", &csrf), ("data", r#"{"plan": "team"}"#)],
    );
    assert_eq!(r.status, 303, "{}", r.text);
    let after = app.get(&format!("/contacts/{id}"), &p.secret).json();
    assert_eq!(after["subscribed"], false, "{after}");
    assert_eq!(after["data"], serde_json::json!({"plan": "team"}));

    let r = v.post(
        &format!("/app/contacts/{id}"),
        &[("csrf", &csrf), ("data", "[1]")],
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("data must be a JSON object"), "{}", r.text);
}

#[test]
fn dashboard_pages_spend_the_projects_api_budget() {
    let app = TestApp::spawn_with(|s| s.limits.requests_per_minute = 5);
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let statuses: Vec<u16> = (0..10).map(|_| v.get("/app/overview").status).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    assert_eq!(
        app.get("/contacts", &p.secret).status,
        429,
        "the API shares the budget the pages spent"
    );
}

#[test]
fn wrong_keys_at_the_sign_in_and_wrong_admin_tokens_spend_one_budget() {
    let app = TestApp::spawn();
    let mut v = Visitor::new(&app);
    for i in 0..3 {
        let r = v.sign_in("sk_wrong");
        assert_eq!(r.status, 401, "wrong key {i}: {}", r.text);
    }
    for i in 0..2 {
        let r = app.get("/admin/projects", &format!("guess-{i}"));
        assert_eq!(r.status, 401, "guess {i}: {}", r.text);
    }
    let r = app.get("/admin/projects", "guess-2");
    assert_eq!(
        r.status, 429,
        "the sixth wrong secret, wherever: {}",
        r.text
    );
    assert_eq!(
        v.sign_in(ADMIN_TOKEN).status,
        429,
        "the sign-in is closed to the blocked address too, right token or not"
    );
}

#[test]
fn a_session_outlives_a_restart_of_the_server() {
    let mut app = TestApp::spawn();
    let p = app.create_project("Acme");
    let cookies = {
        let mut v = Visitor::new(&app);
        assert_eq!(v.sign_in(&p.secret).status, 303);
        v.cookies.clone()
    };
    app.restart();
    let mut v = Visitor::new(&app);
    v.cookies = cookies;
    let page = v.get("/app/overview");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("Acme"));
}

#[test]
fn a_session_started_on_one_node_is_served_and_ended_through_another() {
    use crate::support::cluster::TestCluster;
    let Some(c) = TestCluster::start(2, |_| {}) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Acme");
    let owner = c.owner_of(0, &p.secret);
    let other = c.other_than(owner);
    // Signed in through the node that does not own the project, then served by both.
    let mut first = Visitor::new(c.node(other));
    let signed_in = first.sign_in(&p.secret);
    assert_eq!(signed_in.status, 303, "{}", signed_in.text);
    let page = first.get("/app/overview");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("Acme"));
    assert_eq!(
        page.header("X-Mailroom-Node"),
        Some(format!("node-{owner}").as_str()),
        "the owner served the page"
    );
    let mut second = Visitor::new(c.node(owner));
    second.cookies = first.cookies.clone();
    assert_eq!(second.get("/app/overview").status, 200);
    // Signed out through the owner: the other node knows it at once.
    let form = second.get("/app/overview");
    let csrf = hidden(&form.text, "csrf");
    let out = second.post("/app/sign-out", &[("csrf", &csrf)]);
    assert_eq!(out.status, 303, "{}", out.text);
    assert_eq!(
        first.get("/app/overview").header("location"),
        Some("/app/sign-in"),
        "the session ended on every node"
    );
}

#[test]
fn the_webhooks_page_adds_an_endpoint_shows_its_secret_once_tests_and_disables_it() {
    let app = TestApp::spawn_with(|s| s.webhooks.allow_private_addresses = true);
    let p = app.create_project("Acme");
    let receiver = mailroom_testkit::HookServer::start(200);
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let page = v.get("/app/webhooks");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("No endpoints yet"), "{}", page.text);
    let csrf = hidden(&page.text, "csrf");
    let bad = v.post(
        "/app/webhooks",
        &[
            ("csrf", &csrf),
            ("url", "ftp://example.com"),
            ("events", "*"),
        ],
    );
    assert_eq!(bad.status, 422, "the API's check: {}", bad.text);
    let url = receiver.url("/hook");
    let made = v.post(
        "/app/webhooks",
        &[
            ("csrf", &csrf),
            ("url", &url),
            ("events", "signup, email.sent"),
        ],
    );
    assert_eq!(made.status, 200, "{}", made.text);
    assert!(
        made.text.contains("whsec_"),
        "the secret, once: {}",
        made.text
    );
    let page = v.get("/app/webhooks");
    assert!(page.text.contains(&url) && page.text.contains("signup, email.sent"));
    assert!(!page.text.contains("whsec_"), "not shown again");
    let api = app.get("/webhooks", &p.secret).json();
    let id = api["data"]["webhooks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tested = v.post(&format!("/app/webhooks/{id}/test"), &[("csrf", &csrf)]);
    assert!(tested.text.contains("was delivered"), "{}", tested.text);
    assert_eq!(receiver.hits().len(), 1);
    let off = v.post(
        &format!("/app/webhooks/{id}/enabled"),
        &[("csrf", &csrf), ("enabled", "false")],
    );
    assert_eq!(off.status, 303, "{}", off.text);
    let api = app.get(&format!("/webhooks/{id}"), &p.secret).json();
    assert_eq!(api["data"]["enabled"], false, "{api}");
    let gone = v.post(&format!("/app/webhooks/{id}/delete"), &[("csrf", &csrf)]);
    assert_eq!(gone.status, 303);
    assert_eq!(app.get(&format!("/webhooks/{id}"), &p.secret).status, 404);
}

#[test]
fn the_suppressions_page_adds_imports_and_removes_addresses_and_the_overview_shows_the_rates() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let page = v.get("/app/suppressions");
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text.contains("No address is suppressed"),
        "{}",
        page.text
    );
    let csrf = hidden(&page.text, "csrf");
    let added = v.post(
        "/app/suppressions",
        &[("csrf", &csrf), ("email", "old@example.com")],
    );
    assert_eq!(added.status, 303, "{}", added.text);
    let csv =
        "Email,Reason\nbounced@example.com,hard_bounce\nnot an address,manual\nold@example.com,\n";
    let imported = v.post("/app/suppressions/import", &[("csrf", &csrf), ("csv", csv)]);
    assert_eq!(imported.status, 200, "{}", imported.text);
    assert!(
        imported
            .text
            .contains("1 added, 1 on the list already, 1 not addresses"),
        "{}",
        imported.text
    );
    let api = app
        .get("/suppressions?reason=hard_bounce", &p.secret)
        .json();
    assert_eq!(
        api["suppressions"][0]["email"], "bounced@example.com",
        "{api}"
    );
    let page = v.get("/app/suppressions");
    assert!(page.text.contains("old@example.com") && page.text.contains("bounced@example.com"));
    let gone = v.post(
        "/app/suppressions/remove",
        &[("csrf", &csrf), ("email", "old@example.com")],
    );
    assert_eq!(gone.status, 303, "{}", gone.text);
    assert_eq!(app.get("/suppressions", &p.secret).json()["total"], 1);
    let overview = v.get("/app/overview");
    assert!(
        overview.text.contains("Bounce rate") && overview.text.contains("id=\"suppressed\""),
        "{}",
        overview.text
    );
}

#[test]
fn the_overviews_chart_counts_todays_sent_emails() {
    use crate::support::campaign::{data, eventually, rig};
    let (_dns, _smtp, app, p) = rig(|_| {});
    let mut ids = Vec::new();
    for to in ["ada@example.com", "bea@example.com", "cy@example.com"] {
        let r = app.post(
            "/v1/send",
            &p.secret,
            serde_json::json!({"to": to, "from": "hello@acme.test", "subject": "Hi", "body": "<p>Hi</p>"}),
        );
        ids.push(
            data(&r, 200)["emails"][0]["email"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let sent = eventually(
        30,
        || {
            ids.iter()
                .filter(|id| {
                    data(&app.get(&format!("/emails/{id}"), &p.secret), 200)["status"] == "SENT"
                })
                .count()
        },
        |n| *n == 3,
    );
    assert_eq!(sent, 3);
    let mut v = Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let page = v.get("/app/overview");
    assert_eq!(page.status, 200, "{}", page.text);
    // The chart's numbers, a row a day (oldest first): Sent, Opened, Clicked, Bounced.
    let body = page
        .text
        .split("<tbody>")
        .nth(1)
        .expect("the numbers table");
    let rows: Vec<Vec<u64>> = body
        .split("</tbody>")
        .next()
        .unwrap_or_default()
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td>")
                .skip(1)
                .map(|td| td.split('<').next().unwrap().parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 14, "{rows:?}");
    let column = |i: usize| rows.iter().map(|r| r[i]).sum::<u64>();
    assert_eq!(
        (column(0), column(1), column(2), column(3)),
        (3, 0, 0, 0),
        "{rows:?}"
    );
    assert!(rows[13][0] >= 1, "today is the last row: {rows:?}");
    // The chart's top tick is its largest day.
    let top = rows.iter().map(|r| r[0]).max().unwrap();
    assert!(
        page.text
            .contains(&format!("text-anchor=\"end\">{top}</text>")),
        "{}",
        page.text
    );
}
