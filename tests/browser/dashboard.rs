//! Signing in and out, and what a session can see.

use crate::browser::{available, run, Browser};
use crate::support::app::{TestApp, ADMIN_TOKEN};

pub async fn sign_in(b: &Browser, key: &str) {
    b.goto("/app/sign-in").await;
    b.fill("#key", key).await;
    b.click("form[action='/app/sign-in'] button[type=submit]")
        .await;
}

#[test]
fn signing_in_with_a_secret_key_shows_the_projects_overview_until_signing_out() {
    if !available() {
        return;
    }
    let app = TestApp::spawn();
    let project = app.create_project("Acme");
    app.upsert(
        &project.secret,
        serde_json::json!({"email": "ada@example.com"}),
    );
    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, &project.secret).await;
        assert_eq!(b.text("header .project strong").await, "Acme");
        assert_eq!(b.text("#contacts-total").await, "1");
        assert_eq!(b.text("#outbox-depth").await, "0");
        b.find("figure.chart svg polyline").await;

        b.click("header form[action='/app/sign-out'] button").await;
        b.find("#key").await;
        b.goto("/app/overview").await;
        assert_eq!(b.path().await, "/app/sign-in", "the session ended");
        b.close().await;
    });
}

#[test]
fn the_admin_signs_in_and_sees_only_the_project_it_picked() {
    if !available() {
        return;
    }
    let app = TestApp::spawn();
    let a = app.create_project("Alpha");
    let b_project = app.create_project("Beta");
    app.upsert(&a.secret, serde_json::json!({"email": "a1@example.com"}));
    app.upsert(&a.secret, serde_json::json!({"email": "a2@example.com"}));
    app.upsert(
        &b_project.secret,
        serde_json::json!({"email": "b1@example.com"}),
    );
    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, ADMIN_TOKEN).await;
        b.until_path(|p| p == "/app/projects").await;
        b.screenshot("projects").await;
        b.click("button[aria-label='Open Beta']").await;
        assert_eq!(b.text("header .project strong").await, "Beta");
        assert_eq!(b.text("#contacts-total").await, "1");
        b.close().await;
    });
}

#[test]
fn a_wrong_key_is_refused_with_a_message() {
    if !available() {
        return;
    }
    let app = TestApp::spawn();
    run(async {
        let b = Browser::start(&app.base).await;
        b.goto("/app/sign-in").await;
        b.screenshot("sign-in").await;
        sign_in(&b, "sk_not_a_real_key").await;
        let alert = b.text("p[role=alert]").await;
        assert!(alert.contains("neither"), "{alert}");
        b.close().await;
    });
}
