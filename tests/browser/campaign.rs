//! The whole path through the dashboard: import 1,000 contacts, build a segment, write a
//! template, create a campaign for the segment, test-send it, send it, and watch its
//! stats reach the recipients that the real SMTP server on loopback received.

use std::path::Path;
use std::time::Duration;

use mailroom_testkit::SmtpServer;
use serde_json::json;

use crate::browser::{available, run, Browser};
use crate::dashboard::sign_in;
use crate::support::app::{TestApp, ADMIN_TOKEN};
use crate::support::settings::smtp_relay;

const PRO: usize = 40;
const CONTACTS: usize = 1000;

/// 1,000 contacts, the first `PRO` on the pro plan.
fn write_csv(dir: &Path) -> std::path::PathBuf {
    let mut csv = String::from("email,plan,first\n");
    for i in 0..CONTACTS {
        let plan = if i < PRO { "pro" } else { "free" };
        csv.push_str(&format!("person{i:04}@example.com,{plan},P{i}\n"));
    }
    let path = dir.join("contacts.csv");
    std::fs::write(&path, csv).expect("write the CSV");
    path
}

#[test]
fn a_campaign_built_in_the_dashboard_reaches_its_segment_over_smtp() {
    if !available() {
        return;
    }
    let smtp = SmtpServer::start();
    let port = smtp.port();
    let app = TestApp::spawn_with(|s| smtp_relay(s, port));
    let project = app.create_project("Acme");
    let trusted = app.post(
        &format!("/admin/projects/{}/domains/trust", project.id),
        ADMIN_TOKEN,
        json!({"domain": "acme.test"}),
    );
    assert_eq!(trusted.status, 200, "{}", trusted.text);
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = write_csv(dir.path());

    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, &project.secret).await;

        // Import, and watch the progress page reach the end.
        b.goto("/app/contacts/import").await;
        b.find("#import-file:not([hidden])").await;
        b.find("#file")
            .await
            .send_keys(&csv.display().to_string())
            .await
            .expect("pick the file");
        b.click("#import-file button[type=submit]").await;
        b.find("#import[data-state=done]").await;
        assert_eq!(b.text("#import [data-field=status]").await, "COMPLETED");
        assert_eq!(b.text("#created").await, CONTACTS.to_string());
        b.screenshot("import").await;
        b.goto("/app/contacts?search=person0001").await;
        assert_eq!(b.text("#contacts-count").await, "1 contacts match");
        b.screenshot("contacts").await;
        b.click("main table a").await;
        b.until_text("main h1", |t| t == "person0001@example.com")
            .await;
        b.screenshot("contact").await;

        // A segment of the pro plan, its count live as the filter is typed.
        b.goto("/app/segments").await;
        b.fill("#name", "Pro plan").await;
        b.fill("#field0", "data.plan").await;
        b.fill("#value0", "pro").await;
        b.until_text("#member-count [data-field=count]", |t| t == PRO.to_string())
            .await;
        b.screenshot("segments").await;
        b.click("#segment-form button:not(.secondary)").await;
        assert_eq!(b.text("td.members").await, PRO.to_string());

        // A template, previewed with a contact's data.
        b.goto("/app/templates").await;
        b.fill("#name", "Welcome").await;
        b.fill("#subject", "Hello {{first}}").await;
        b.fill(
            "#body",
            "<p>Hi {{first}}, you are on {{plan ?? \"no plan\"}}.</p>",
        )
        .await;
        b.fill("#contact", "person0003@example.com").await;
        b.until_text("#preview-subject", |t| t == "Hello P3").await;
        let html = b
            .until_text("#preview-html", |t| t.contains("you are on pro"))
            .await;
        assert!(html.contains("Hi P3"), "{html}");
        b.screenshot("templates").await;
        b.click("#template-form button:not(.secondary)").await;
        b.until_path(|p| p.starts_with("/app/templates/")).await;
        assert_eq!(b.text("main h1").await, "Welcome");
        b.fill("#test-email", "person0003@example.com").await;
        b.fill("#test-from", "hello@acme.test").await;
        b.click("#test-form button").await;
        b.find("#test-sent").await;
        let got = smtp.wait_for(1, Duration::from_secs(20));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].rcpt_to, ["person0003@example.com"]);
        assert!(
            got[0].text().contains("Hello P3"),
            "rendered for the contact"
        );

        // A campaign for the segment: create, test send, send, and live stats.
        b.goto("/app/campaigns").await;
        b.fill("#name", "Pro news").await;
        b.fill("#from", "news@acme.test").await;
        b.fill("#subject", "News for {{first}}").await;
        b.fill("#body", "<p>Hello {{first}}</p>").await;
        b.find("#audience")
            .await
            .select_by_label("Segment: Pro plan")
            .await
            .expect("pick the segment");
        b.click("#campaign-form button").await;
        assert_eq!(b.text("#status").await, "DRAFT");
        b.screenshot("campaign-draft").await;
        let campaign_page = b.path().await;

        b.fill("#test-email", "tester@example.com").await;
        b.click("#test-form button").await;
        b.find("#test-sent").await;
        let test = smtp.wait_for(2, Duration::from_secs(20));
        assert!(
            test.iter()
                .any(|m| m.rcpt_to.iter().any(|r| r == "tester@example.com")),
            "the test arrived"
        );

        b.goto(&campaign_page).await;
        b.click("#send-form button").await;
        b.until_text("#stat-sent", |t| t == PRO.to_string()).await;
        b.find("#stats[data-state=done]").await;
        assert_eq!(b.text("#stats [data-field=status]").await, "SENT");
        b.screenshot("campaign").await;
        let got = smtp.wait_for(PRO + 2, Duration::from_secs(20));
        let mut campaign_rcpts: Vec<String> =
            got[2..].iter().map(|m| m.rcpt_to.join(",")).collect();
        campaign_rcpts.sort();
        let pro: Vec<String> = (0..PRO)
            .map(|i| format!("person{i:04}@example.com"))
            .collect();
        assert_eq!(
            campaign_rcpts, pro,
            "one email to each pro contact, none to the others"
        );

        b.goto("/app/overview").await;
        b.screenshot("overview").await;
        b.click("header form[action='/app/sign-out'] button").await;
        b.find("#key").await;
        b.close().await;
    });
}
