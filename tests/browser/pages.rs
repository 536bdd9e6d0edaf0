//! The pages beside the campaign path: workflows, events, sender domains, settings,
//! and what a session of one project cannot reach of another's.

use serde_json::json;

use crate::browser::{available, run, Browser};
use crate::dashboard::sign_in;
use crate::support::app::TestApp;

#[test]
fn workflows_show_their_steps_as_a_graph_and_are_disabled_and_enabled_from_the_list() {
    if !available() {
        return;
    }
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/workflows",
        &p.secret,
        json!({"name": "Onboarding", "triggerEvent": "signup", "enabled": true,
               "steps": [
                 {"id": "wait", "type": "DELAY", "config": {"amount": 1, "unit": "hours"}, "next": "check"},
                 {"id": "check", "type": "CONDITION",
                  "config": {"field": "data.plan", "operator": "equals", "value": "pro"},
                  "yes": "leave", "no": "leave"},
                 {"id": "leave", "type": "EXIT", "config": {}, "next": null}]}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.post(
        "/v1/track",
        &p.secret,
        json!({"email": "ada@example.com", "event": "signup"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, &p.secret).await;
        b.goto("/app/workflows").await;
        assert_eq!(b.text("td.enabled").await, "yes");
        b.click("button[aria-label='Disable Onboarding']").await;
        b.until_text("strong.enabled", |t| t == "no").await;
        let after = app.get("/workflows", &p.secret).json();
        assert_eq!(after["workflows"][0]["enabled"], false, "{after}");
        b.click("button[aria-label='Enable Onboarding']").await;
        b.until_text("strong.enabled", |t| t == "yes").await;
        assert_eq!(
            b.client
                .find_all(fantoccini::Locator::Css("figure svg rect"))
                .await
                .expect("boxes")
                .len(),
            3
        );
        assert_eq!(
            b.client
                .find_all(fantoccini::Locator::Css("figure svg path[marker-end]"))
                .await
                .expect("edges")
                .len(),
            3
        );
        let execution = b.text("details summary").await;
        assert!(execution.starts_with("WAITING"), "{execution}");
        b.screenshot("workflow").await;

        b.goto("/app/events").await;
        b.fill("#name", "signup").await;
        b.click("form[role=search] button").await;
        b.until_text("#events-count", |t| t == "1 events named signup")
            .await;
        b.screenshot("events").await;
        b.close().await;
    });
}

#[test]
fn a_domain_is_added_shows_its_records_with_copy_buttons_and_is_checked_on_demand() {
    if !available() {
        return;
    }
    let app = TestApp::spawn_with_dns(|_| {});
    let p = app.create_project("Acme");
    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, &p.secret).await;
        b.goto("/app/domains").await;
        b.fill("#domain", "mail.acme.test").await;
        b.click("#domain-form button").await;
        assert_eq!(b.text("section.domain h2").await, "mail.acme.test PENDING");
        let copies = b
            .client
            .find_all(fantoccini::Locator::Css("button[data-copy]:not([hidden])"))
            .await
            .expect("copy buttons");
        assert!(copies.len() >= 4, "a name and a value button per record");
        b.screenshot("domains").await;
        // Publish the records, then check now.
        // (On a thread of its own: the DNS server's calls run a runtime of their own.)
        let d = app.get("/domains", &p.secret).json();
        std::thread::scope(|s| {
            s.spawn(|| {
                for rec in d["domains"][0]["records"].as_array().unwrap() {
                    if rec["purpose"] == "OWNERSHIP" || rec["purpose"] == "DKIM" {
                        let (name, value) = (
                            rec["name"].as_str().unwrap(),
                            rec["value"].as_str().unwrap(),
                        );
                        app.dns().set_txt(name, &[value]);
                    }
                }
            });
        });
        b.click("button[aria-label='Verify mail.acme.test now']")
            .await;
        b.until_text("section.domain h2", |t| t == "mail.acme.test VERIFIED")
            .await;
        b.close().await;
    });
}

#[test]
fn rotating_the_keys_shows_the_new_ones_once_and_keeps_the_session() {
    if !available() {
        return;
    }
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, &p.secret).await;
        b.goto("/app/settings").await;
        b.screenshot("settings").await;
        b.click("#confirm").await;
        b.click("#rotate-form button").await;
        let secret = b.text("#secret-key").await;
        assert!(secret.starts_with("sk_") && secret != p.secret, "{secret}");
        assert_eq!(
            app.get("/contacts", &p.secret).status,
            401,
            "the old key is gone"
        );
        assert_eq!(
            app.get("/contacts", &secret).status,
            200,
            "the new key works"
        );
        b.goto("/app/settings").await;
        assert!(
            b.client
                .find(fantoccini::Locator::Css("#secret-key"))
                .await
                .is_err(),
            "shown once"
        );
        assert_eq!(b.path().await, "/app/settings", "still signed in");
        b.close().await;
    });
}

#[test]
fn a_session_of_one_project_cannot_open_another_projects_contact() {
    if !available() {
        return;
    }
    let app = TestApp::spawn();
    let a = app.create_project("Alpha");
    let other = app.create_project("Beta");
    let theirs = app.upsert(&other.secret, json!({"email": "secret@beta.test"}));
    let id = theirs["id"].as_str().unwrap().to_owned();
    run(async {
        let b = Browser::start(&app.base).await;
        sign_in(&b, &a.secret).await;
        b.goto(&format!("/app/contacts/{id}")).await;
        let alert = b.text("p[role=alert]").await;
        assert!(alert.to_lowercase().contains("not found"), "{alert}");
        b.goto("/app/contacts").await;
        assert_eq!(b.text("#contacts-count").await, "0 contacts");
        b.close().await;
    });
}
