//! Campaigns (API.md section 9): who an audience reaches, schedules on the moved clock,
//! cancel before and during sending, the 409s of the status machine, test sends,
//! one-click unsubscribe, open and click tracking, bounces, and `kill -9` while a
//! campaign sends or waits for its time. Mail goes through a real SMTP server on loopback.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use mailroom_testkit::{SmtpServer, Stage};
use serde_json::{json, Value};

use crate::support::app::{assert_over_filter_budget, Project, TestApp, ADMIN_TOKEN};
use crate::support::campaign::*;
use mailroom_testkit::TestDns;

#[test]
fn a_campaign_to_all_reaches_each_subscribed_contact_once() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let subscribed = emails("in", 5);
    contacts(&app, &p, &subscribed, true);
    contacts(&app, &p, &emails("out", 2), false);
    let c = create(
        &app,
        &p,
        json!({"fromName": "Acme News", "replyTo": "help@acme.test", "description": "spring"}),
    );
    assert_eq!(
        (
            c["status"].as_str(),
            c["type"].as_str(),
            c["name"].as_str(),
            c["from"].as_str()
        ),
        (Some("DRAFT"), Some("ALL"), Some("Spring"), Some(FROM)),
        "{c}"
    );
    assert!(c["scheduledAt"].is_null() && c["sentAt"].is_null(), "{c}");
    let cid = id(&c);
    let (got, s) = send_and_settle(&app, &p, &smtp, &cid, 5);
    assert_eq!(
        rcpts(&got),
        subscribed,
        "the subscribed contacts, once each"
    );
    for m in &got {
        let raw = m.text();
        let to = header_of(&raw, "To").unwrap_or_default();
        assert!(
            to.contains(&m.rcpt_to[0]) && !to.contains(','),
            "To names only its recipient: {to}"
        );
        assert_eq!(
            header_of(&raw, "Subject"),
            Some(format!("Hello {}", m.rcpt_to[0])),
            "the subject is rendered for its recipient"
        );
        assert!(
            header_of(&raw, "From")
                .unwrap_or_default()
                .contains("Acme News"),
            "{raw}"
        );
        assert_eq!(
            header_of(&raw, "Reply-To").as_deref(),
            Some("help@acme.test")
        );
    }
    assert_eq!(
        (
            count(&s, "totalRecipients"),
            count(&s, "delivered"),
            count(&s, "sent"),
            count(&s, "queued")
        ),
        (5, 5, 5, 0),
        "{s}"
    );
    assert!(rate_is(&s, "deliveryRate", 1.0), "{s}");
    assert_eq!(
        smtp.count(),
        5,
        "no second copy and no unsubscribed contact"
    );
}

#[test]
fn a_segment_campaign_reaches_only_the_subscribed_members_of_the_segment() {
    let (_dns, smtp, app, p) = rig(|_| {});
    planned_contacts(&app, &p);
    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Pro", "filters": plan_is("pro")}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let segment = id(&r.json());
    let members = app.get(&format!("/segments/{segment}"), &p.secret).json();
    assert_eq!(
        members["memberCount"], 3,
        "the unsubscribed pro is a member: {members}"
    );
    let c = create(&app, &p, json!({"type": "SEGMENT", "segmentId": segment}));
    assert_eq!(
        (c["type"].as_str(), c["segmentId"].as_str()),
        (Some("SEGMENT"), Some(segment.as_str())),
        "{c}"
    );
    let (got, s) = send_and_settle(&app, &p, &smtp, &id(&c), 2);
    assert_eq!(rcpts(&got), ["pro0@example.com", "pro1@example.com"]);
    assert_eq!(count(&s, "totalRecipients"), 2, "{s}");
    assert_eq!(smtp.count(), 2);
}

#[test]
fn a_scheduled_campaign_whose_segment_was_deleted_ends_cancelled_instead_of_sending_for_ever() {
    let (_dns, smtp, app, p) = rig(|_| {});
    planned_contacts(&app, &p);
    let r = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Pro", "filters": plan_is("pro")}),
    );
    let segment = id(&r.json());
    let cid = id(&create(
        &app,
        &p,
        json!({"type": "SEGMENT", "segmentId": segment}),
    ));
    let at = iso(server_now(&app) + TimeDelta::milliseconds(60_000));
    let c = data(&send(&app, &p, &cid, json!({ "scheduledAt": at })), 200);
    assert_eq!(c["status"], "SCHEDULED", "{c}");
    assert_eq!(
        app.delete(&format!("/segments/{segment}"), &p.secret)
            .status,
        204
    );
    advance(&app, 61_000);
    let c = campaign_when(&app, &p, &cid, "CANCELLED");
    assert_eq!(c["status"], "CANCELLED", "{c}");
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(campaign_mail(&smtp), 0, "nothing went out");
}

#[test]
fn a_filtered_campaign_reaches_only_the_subscribed_contacts_matching_its_filter() {
    let (_dns, smtp, app, p) = rig(|_| {});
    planned_contacts(&app, &p);
    let c = create(
        &app,
        &p,
        json!({"type": "FILTERED", "audienceFilter": plan_is("free")}),
    );
    assert_eq!(c["type"], "FILTERED", "{c}");
    assert_eq!(
        c["audienceFilter"]["conditions"][0]["field"], "data.plan",
        "{c}"
    );
    let (got, s) = send_and_settle(&app, &p, &smtp, &id(&c), 2);
    assert_eq!(rcpts(&got), ["free0@example.com", "free1@example.com"]);
    assert_eq!(count(&s, "totalRecipients"), 2, "{s}");
    assert_eq!(smtp.count(), 2);
}

#[test]
fn a_campaign_scheduled_three_seconds_ahead_waits_and_goes_out_when_the_clock_reaches_it() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("s", 2), true);
    let cid = id(&create(&app, &p, json!({})));
    let at = iso(server_now(&app) + TimeDelta::milliseconds(3000));
    let c = data(&send(&app, &p, &cid, json!({ "scheduledAt": at })), 200);
    assert_eq!(c["status"], "SCHEDULED", "{c}");
    assert_eq!(c["scheduledAt"], at.as_str(), "{c}");
    assert!(c["sentAt"].is_null(), "{c}");
    assert_eq!(campaign(&app, &p, &cid)["status"], "SCHEDULED");
    assert_eq!(smtp.count(), 0, "nothing goes out before its time");
    advance(&app, 3000);
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    assert!(c["sentAt"].is_string(), "{c}");
    let got = smtp.wait_for(2, wait());
    assert_eq!(rcpts(&got), ["s0@example.com", "s1@example.com"]);
}

#[test]
fn a_campaign_scheduled_an_hour_ahead_goes_out_only_once_the_clock_passes_that_hour() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("h", 2), true);
    let cid = id(&create(&app, &p, json!({})));
    let at = iso(server_now(&app) + TimeDelta::milliseconds(3_600_000));
    let c = data(&send(&app, &p, &cid, json!({ "scheduledAt": at })), 200);
    assert_eq!(c["status"], "SCHEDULED", "{c}");
    // Half way there: still waiting (the control email went out, the campaign did not).
    advance(&app, 1_800_000);
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        campaign_mail(&smtp),
        0,
        "half an hour early, nothing went out"
    );
    assert_eq!(campaign(&app, &p, &cid)["status"], "SCHEDULED");
    // Past the hour, without sleeping through it.
    advance(&app, 1_800_001);
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    let got = smtp.wait_for(3, wait());
    assert_eq!(
        rcpts(&got),
        ["control@example.com", "h0@example.com", "h1@example.com"]
    );
}

#[test]
fn a_cancelled_schedule_goes_back_to_draft_and_sends_nothing_when_its_time_passes() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("c", 3), true);
    let cid = id(&create(&app, &p, json!({})));
    let at = iso(server_now(&app) + TimeDelta::milliseconds(3_600_000));
    let c = data(&send(&app, &p, &cid, json!({ "scheduledAt": at })), 200);
    assert_eq!(c["status"], "SCHEDULED", "{c}");
    let c = data(&cancel(&app, &p, &cid), 200);
    assert_eq!(c["status"], "DRAFT", "{c}");
    assert!(c["scheduledAt"].is_null(), "the schedule is cleared: {c}");
    advance(&app, 2 * 3_600_000);
    // Anything due went out before this control email did.
    control(&app, &p, &smtp, "control@example.com");
    assert_eq!(
        campaign_mail(&smtp),
        0,
        "the cancelled schedule sent nothing"
    );
    let c = campaign(&app, &p, &cid);
    assert_eq!(
        (c["status"].as_str(), c["sentAt"].is_null()),
        (Some("DRAFT"), true),
        "{c}"
    );
    assert_eq!(count(&stats(&app, &p, &cid), "totalRecipients"), 0);
}

#[test]
fn cancelling_a_campaign_while_it_sends_stops_it_and_drops_what_is_still_queued() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.sending.rate_per_second = 14;
        s.campaigns.queue_ahead = 20;
        s.campaigns.batch_size = 10;
    });
    contacts(&app, &p, &emails("r", 200), true);
    let cid = id(&create(&app, &p, json!({})));
    let c = data(&send(&app, &p, &cid, json!({})), 200);
    assert_eq!(c["status"], "SENDING", "{c}");
    assert!(
        !smtp.wait_for(1, Duration::from_secs(30)).is_empty(),
        "sending started"
    );
    let c = data(&cancel(&app, &p, &cid), 200);
    assert_eq!(c["status"], "CANCELLED", "{c}");
    assert_eq!(campaign(&app, &p, &cid)["status"], "CANCELLED");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "queued") == 0);
    assert_eq!(count(&s, "queued"), 0, "the outbox is emptied: {s}");
    control(&app, &p, &smtp, "control1@example.com");
    // The stats settle on what the relay got.
    let (s, got) = eventually(
        30,
        || {
            let got = campaign_mail(&smtp);
            (stats(&app, &p, &cid), got)
        },
        |(s, got): &(Value, usize)| count(s, "delivered") == *got as u64,
    );
    assert_eq!(count(&s, "delivered"), got as u64, "{s}");
    assert!(
        got < 200,
        "the cancel stopped the campaign ({got} of 200 arrived)"
    );
    assert_eq!(count(&s, "totalRecipients"), 200, "{s}");
    assert!(
        count(&s, "cancelled") >= 1,
        "emails waiting in the outbox were dropped: {s}"
    );
    let accounted = count(&s, "delivered")
        + count(&s, "bounced")
        + count(&s, "failed")
        + count(&s, "cancelled");
    assert!(
        accounted <= 200,
        "each email made is delivered, bounced, failed or cancelled, once: {s}"
    );
    // Nothing more goes out afterwards.
    control(&app, &p, &smtp, "control2@example.com");
    assert_eq!(
        campaign_mail(&smtp),
        got,
        "no campaign email after the cancel"
    );
    let later = stats(&app, &p, &cid);
    assert_eq!(
        (count(&later, "delivered"), count(&later, "cancelled")),
        (count(&s, "delivered"), count(&s, "cancelled")),
        "{later}"
    );
    assert_eq!(campaign(&app, &p, &cid)["status"], "CANCELLED");
    // CANCELLED is final.
    assert_conflict(&cancel(&app, &p, &cid), "CANCELLED");
    assert_conflict(
        &app.delete(&format!("/campaigns/{cid}"), &p.secret),
        "CANCELLED",
    );
}

#[test]
fn changing_a_campaign_in_a_status_that_does_not_allow_it_is_a_409_naming_the_status() {
    let (_dns, _smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("a", 1), true);

    // DRAFT: cancel is refused; PATCH works.
    let draft = id(&create(&app, &p, json!({"name": "Draft"})));
    assert_conflict(&cancel(&app, &p, &draft), "DRAFT");
    let r = app.patch(
        &format!("/campaigns/{draft}"),
        &p.secret,
        json!({"name": "Renamed"}),
    );
    assert_eq!(data(&r, 200)["name"], "Renamed");

    // SCHEDULED: PATCH works, DELETE is refused; after a cancel it deletes.
    let at = iso(server_now(&app) + TimeDelta::milliseconds(3_600_000));
    let c = data(&send(&app, &p, &draft, json!({ "scheduledAt": at })), 200);
    assert_eq!(c["status"], "SCHEDULED", "{c}");
    let r = app.patch(
        &format!("/campaigns/{draft}"),
        &p.secret,
        json!({"subject": "Later"}),
    );
    assert_eq!(data(&r, 200)["subject"], "Later");
    assert_conflict(
        &app.delete(&format!("/campaigns/{draft}"), &p.secret),
        "SCHEDULED",
    );
    assert_eq!(data(&cancel(&app, &p, &draft), 200)["status"], "DRAFT");
    let r = app.delete(&format!("/campaigns/{draft}"), &p.secret);
    assert_eq!(r.status, 204, "{}", r.text);
    let r = app.get(&format!("/campaigns/{draft}"), &p.secret);
    assert_eq!((r.status, r.code().as_str()), (404, "CAMPAIGN_NOT_FOUND"));

    // SENT: no PATCH, no DELETE, no cancel.
    let sent = id(&create(&app, &p, json!({"name": "Sent"})));
    data(&send(&app, &p, &sent, json!({})), 200);
    assert_eq!(campaign_when(&app, &p, &sent, "SENT")["status"], "SENT");
    assert_conflict(
        &app.patch(
            &format!("/campaigns/{sent}"),
            &p.secret,
            json!({"name": "Too late"}),
        ),
        "SENT",
    );
    assert_conflict(
        &app.delete(&format!("/campaigns/{sent}"), &p.secret),
        "SENT",
    );
    assert_conflict(&cancel(&app, &p, &sent), "SENT");
    let c = campaign(&app, &p, &sent);
    assert_eq!(
        (c["name"].as_str(), c["status"].as_str()),
        (Some("Sent"), Some("SENT")),
        "unchanged: {c}"
    );
}

#[test]
fn a_test_send_reaches_any_address_with_a_test_subject_and_is_not_counted() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let cid = id(&create(&app, &p, json!({"subject": "Spring news"})));
    let r = app.post(
        &format!("/campaigns/{cid}/test"),
        &p.secret,
        json!({"email": "qa@elsewhere.example"}),
    );
    let email = data(&r, 200)["email"]
        .as_str()
        .expect("the test email's id")
        .to_owned();
    let got = smtp.wait_for(1, wait());
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].rcpt_to, ["qa@elsewhere.example"]);
    assert_eq!(
        header_of(&got[0].text(), "Subject").as_deref(),
        Some("[TEST] Spring news")
    );
    let e = eventually(
        10,
        || email_record(&app, &p, &email),
        |e: &Value| e["status"] == "SENT",
    );
    assert_eq!(e["status"], "SENT", "{e}");
    let s = stats(&app, &p, &cid);
    assert_eq!(
        (
            count(&s, "totalRecipients"),
            count(&s, "sent"),
            count(&s, "delivered"),
            count(&s, "queued")
        ),
        (0, 0, 0, 0),
        "a test send is not counted: {s}"
    );
    assert_eq!(
        campaign(&app, &p, &cid)["status"],
        "DRAFT",
        "a test send does not start the campaign"
    );
}

#[test]
fn the_one_click_unsubscribe_link_of_a_campaign_email_unsubscribes_its_recipient() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &["ada@example.com".to_owned()], true);
    let cid = id(&create(&app, &p, json!({})));
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 1);
    let raw = got[0].text();
    assert_eq!(
        header_of(&raw, "List-Unsubscribe-Post").as_deref(),
        Some("List-Unsubscribe=One-Click"),
        "{raw}"
    );
    let list = header_of(&raw, "List-Unsubscribe").expect("a List-Unsubscribe header");
    assert!(list.starts_with("<http") && list.ends_with('>'), "{list}");
    let path = link_path(&list, "/unsubscribe/").expect("an unsubscribe URL");
    let html = html_of(&raw);
    assert!(
        html.contains("/unsubscribe/"),
        "an unsubscribe footer link: {html}"
    );

    // GET shows a page and changes nothing (scanners fetch links).
    let page = visit(&app, "GET", &path, None);
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.header("content-type")
            .unwrap_or_default()
            .starts_with("text/html"),
        "{:?}",
        page.headers
    );
    assert_eq!(
        contact_of(&app, &p, "ada@example.com")["subscribed"],
        true,
        "a GET does not unsubscribe"
    );

    // POST, as a mail client's one-click button sends it (RFC 8058).
    let r = visit(&app, "POST", &path, Some("List-Unsubscribe=One-Click"));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(contact_of(&app, &p, "ada@example.com")["subscribed"], false);
    let events = eventually(
        10,
        || {
            app.get("/events?name=contact.unsubscribed", &p.secret)
                .json()
        },
        |e: &Value| e["total"] == 1,
    );
    assert_eq!(events["total"], 1, "{events}");
    assert_eq!(events["events"][0]["email"], "ada@example.com");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "unsubscribed") == 1);
    assert_eq!(count(&s, "unsubscribed"), 1, "{s}");

    // Again: still 200, nothing more recorded.
    let again = visit(&app, "POST", &path, Some("List-Unsubscribe=One-Click"));
    assert_eq!(again.status, 200, "{}", again.text);
    let events = app
        .get("/events?name=contact.unsubscribed", &p.secret)
        .json();
    assert_eq!(events["total"], 1, "{events}");
    assert_eq!(count(&stats(&app, &p, &cid), "unsubscribed"), 1);

    // A token that fails its signature.
    let forged = tampered(&path);
    assert_eq!(visit(&app, "GET", &forged, None).status, 404, "{forged}");
    assert_eq!(
        visit(&app, "POST", &forged, Some("List-Unsubscribe=One-Click")).status,
        404,
        "{forged}"
    );
}

#[test]
fn opens_and_clicks_count_once_per_email_and_a_click_redirects_to_the_original_link() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &["ada@example.com".to_owned()], true);
    let cid = id(&create(
        &app,
        &p,
        json!({"body": "<p>Hi</p><a href=\"https://example.com/x\">x</a>"}),
    ));
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 1);
    let raw = got[0].text();
    let html = html_of(&raw);
    let pixel = link_path(&html, "/t/o/").unwrap_or_else(|| panic!("an open pixel: {html}"));
    let click = link_path(&html, "/t/c/").unwrap_or_else(|| panic!("a tracked link: {html}"));
    assert!(
        !html.contains("href=\"https://example.com/x\""),
        "the link goes through the click redirect: {html}"
    );
    let email = email_id_of(&raw);

    let r = visit(&app, "GET", &pixel, None);
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("image/gif"),
        "{:?}",
        r.headers
    );
    let r = visit(&app, "GET", &click, None);
    assert_eq!(r.status, 302, "{}", r.text);
    assert_eq!(r.header("location"), Some("https://example.com/x"));
    let s = stats_when(&app, &p, &cid, |s: &Value| {
        count(s, "opened") == 1 && count(s, "clicked") == 1
    });
    assert_eq!((count(&s, "opened"), count(&s, "clicked")), (1, 1), "{s}");

    // The same email opened again: two opens on the email, still one opener.
    assert_eq!(visit(&app, "GET", &pixel, None).status, 200);
    let e = eventually(
        10,
        || email_record(&app, &p, &email),
        |e: &Value| e["opens"] == 2,
    );
    assert_eq!(
        (e["opens"].as_u64(), e["clicks"].as_u64()),
        (Some(2), Some(1)),
        "{e}"
    );
    assert!(
        e["openedAt"].is_string() && e["clickedAt"].is_string(),
        "{e}"
    );
    assert_eq!(e["campaignId"], cid.as_str(), "{e}");
    let s = stats(&app, &p, &cid);
    assert_eq!((count(&s, "opened"), count(&s, "clicked")), (1, 1), "{s}");
    assert!(
        rate_is(&s, "openRate", 1.0) && rate_is(&s, "clickRate", 1.0),
        "{s}"
    );
    let clicks = app.get("/events?name=email.click", &p.secret).json();
    assert_eq!(clicks["total"], 1, "{clicks}");

    // Tokens are signed: a changed one is not followed anywhere.
    assert_eq!(visit(&app, "GET", &tampered(&click), None).status, 404);
    assert_eq!(visit(&app, "GET", &tampered(&pixel), None).status, 404);
}

#[test]
fn a_recipient_refused_with_550_at_rcpt_bounces_and_is_unsubscribed() {
    let (_dns, smtp, app, p) = rig(|_| {});
    let all = emails("b", 3);
    contacts(&app, &p, &all, true);
    // Whichever recipient's RCPT TO comes first is refused.
    smtp.refuse(Stage::RcptTo, "550 5.1.1 No such user");
    let cid = id(&create(&app, &p, json!({})));
    data(&send(&app, &p, &cid, json!({})), 200);
    let s = stats_when(&app, &p, &cid, |s: &Value| {
        count(s, "bounced") == 1 && count(s, "delivered") == 2
    });
    assert_eq!(
        (
            count(&s, "bounced"),
            count(&s, "delivered"),
            count(&s, "sent"),
            count(&s, "totalRecipients")
        ),
        (1, 2, 3, 3),
        "{s}"
    );
    assert!(rate_is(&s, "bounceRate", 1.0 / 3.0), "{s}");
    assert!(rate_is(&s, "deliveryRate", 2.0 / 3.0), "{s}");
    assert_eq!(
        count(&s, "unsubscribed"),
        0,
        "a bounce is not an unsubscribe through the campaign's link: {s}"
    );
    let delivered = rcpts(&smtp.received());
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    let gone: Vec<&String> = all.iter().filter(|&e| !delivered.contains(e)).collect();
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert_eq!(
        contact_of(&app, &p, gone[0])["subscribed"],
        false,
        "the bounced address is unsubscribed"
    );
    let list = app.get("/suppressions", &p.secret).json();
    assert_eq!(
        (
            list["suppressions"][0]["email"].as_str(),
            list["suppressions"][0]["reason"].as_str(),
            list["total"].as_u64()
        ),
        (Some(gone[0].as_str()), Some("hard_bounce"), Some(1)),
        "and on the suppression list: {list}"
    );
    for e in &delivered {
        assert_eq!(contact_of(&app, &p, e)["subscribed"], true, "{e}");
    }
    assert_eq!(campaign_when(&app, &p, &cid, "SENT")["status"], "SENT");
}

#[test]
fn invalid_campaigns_and_unknown_or_foreign_ids_get_the_documented_errors() {
    let (_dns, _smtp, app, p) = rig(|_| {});
    let refused = |body: Value| {
        let r = app.post("/campaigns", &p.secret, body);
        assert_eq!(r.status, 422, "{}", r.text);
        assert_eq!(r.code(), "VALIDATION_ERROR");
        r.field_codes()
    };

    let codes = refused(json!({"type": "ALL"}));
    for field in ["name", "subject", "body", "from"] {
        assert!(
            codes.contains(&(field.to_owned(), "invalid_type".to_owned())),
            "{field}: {codes:?}"
        );
    }
    let codes = refused(campaign_body(json!({"body": "<p>{{ unclosed</p>"})));
    assert!(
        codes.contains(&("body".to_owned(), "template_syntax".to_owned())),
        "{codes:?}"
    );
    let codes = refused(campaign_body(json!({"subject": "Hi {{ name"})));
    assert!(
        codes.contains(&("subject".to_owned(), "template_syntax".to_owned())),
        "{codes:?}"
    );
    let codes = refused(campaign_body(json!({"from": "news@elsewhere.test"})));
    assert!(
        codes.contains(&("from".to_owned(), "unverified_domain".to_owned())),
        "{codes:?}"
    );
    let codes = refused(campaign_body(json!({"type": "SEGMENT"})));
    assert!(codes.iter().any(|(f, _)| f == "segmentId"), "{codes:?}");
    let codes = refused(campaign_body(json!({"type": "FILTERED"})));
    assert!(
        codes.iter().any(|(f, _)| f == "audienceFilter"),
        "{codes:?}"
    );
    let codes = refused(campaign_body(json!({"type": "EVERYONE"})));
    assert!(codes.iter().any(|(f, _)| f == "type"), "{codes:?}");

    let r = app.post(
        "/campaigns",
        &p.secret,
        campaign_body(json!({"type": "SEGMENT", "segmentId": MISSING_ID})),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (404, "SEGMENT_NOT_FOUND"),
        "{}",
        r.text
    );

    // An audience with nobody subscribed in it.
    contacts(&app, &p, &emails("out", 1), false);
    let cid = id(&create(&app, &p, json!({})));
    let r = send(&app, &p, &cid, json!({}));
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "VALIDATION_ERROR"),
        "{}",
        r.text
    );
    assert_eq!(campaign(&app, &p, &cid)["status"], "DRAFT");
    let r = app.patch(
        &format!("/campaigns/{cid}"),
        &p.secret,
        json!({"body": "{{ unclosed"}),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(
        r.field_codes()
            .contains(&("body".to_owned(), "template_syntax".to_owned())),
        "{}",
        r.text
    );

    // Ids that do not exist, well-formed or not, and another project's campaign.
    let other = app.create_project("Other");
    let asks = |key: &str, campaign_id: &str| {
        let path = format!("/campaigns/{campaign_id}");
        let name = Some(json!({"name": "x"}).to_string());
        let empty = Some("{}".to_owned());
        let test = Some(json!({"email": "qa@example.com"}).to_string());
        for (method, path, body) in [
            ("GET", path.clone(), None),
            ("PATCH", path.clone(), name),
            ("DELETE", path.clone(), None),
            ("POST", format!("{path}/send"), empty.clone()),
            ("POST", format!("{path}/cancel"), empty),
            ("POST", format!("{path}/test"), test),
            ("GET", format!("{path}/stats"), None),
        ] {
            let r = app.request(method, &path, Some(key), body.as_deref());
            assert_eq!(
                (r.status, r.code().as_str()),
                (404, "CAMPAIGN_NOT_FOUND"),
                "{method} {path}: {}",
                r.text
            );
        }
    };
    asks(&p.secret, MISSING_ID);
    asks(&p.secret, "nope");
    asks(&other.secret, &cid);
    let c = campaign(&app, &p, &cid);
    assert_eq!(
        (c["name"].as_str(), c["status"].as_str()),
        (Some("Spring"), Some("DRAFT")),
        "another project changed nothing: {c}"
    );
    let theirs = data(&app.get("/campaigns", &other.secret), 200);
    assert_eq!(theirs["total"], 0, "{theirs}");
}

#[test]
fn the_campaign_list_is_newest_first_and_pages_with_a_cursor() {
    let (_dns, _smtp, app, p) = rig(|_| {});
    for name in ["first", "second", "third"] {
        create(&app, &p, json!({ "name": name }));
    }
    let names = |page: &Value| -> Vec<String> {
        page["campaigns"]
            .as_array()
            .unwrap_or_else(|| panic!("a list: {page}"))
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let page = data(&app.get("/campaigns?limit=2", &p.secret), 200);
    assert_eq!(names(&page), ["third", "second"], "{page}");
    assert_eq!(
        (page["total"].as_u64(), page["hasMore"].as_bool()),
        (Some(3), Some(true)),
        "{page}"
    );
    let cursor = page["cursor"].as_str().expect("a cursor").to_owned();
    let page = data(
        &app.get(&format!("/campaigns?limit=2&cursor={cursor}"), &p.secret),
        200,
    );
    assert_eq!(names(&page), ["first"], "{page}");
    assert_eq!(
        (page["hasMore"].as_bool(), page["cursor"].is_null()),
        (Some(false), true),
        "{page}"
    );
}

#[test]
fn kill_9_in_the_middle_of_a_5000_recipient_campaign_leaves_no_one_out_after_a_restart() {
    let (_dns, smtp, mut app, p) = rig(|s| {
        s.sending.rate_per_second = 500;
        s.campaigns.queue_ahead = 200;
        s.campaigns.batch_size = 100;
    });
    smtp.count_only(); // 5,000 bodies are not needed, only who got one
    let mut audience = emails("k", 5000);
    contacts(&app, &p, &audience, true);
    let cid = id(&create(&app, &p, json!({})));
    data(&send(&app, &p, &cid, json!({})), 200);
    eventually(60, || smtp.count(), |sent: &u64| *sent >= 1000);
    app.kill9();
    let at_kill = smtp.count();
    assert!(
        (1000..5000).contains(&at_kill),
        "killed in the middle ({at_kill} of 5000 had arrived)"
    );
    app.restart();
    let copies = eventually(
        120,
        || tally(&smtp.received()),
        |t: &BTreeMap<String, usize>| t.len() >= 5000,
    );
    audience.sort();
    assert_eq!(copies.len(), 5000, "recipients reached after the restart");
    assert!(
        copies.keys().eq(audience.iter()),
        "exactly the audience, no one missing"
    );
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "queued") == 0);
    assert_eq!(
        (count(&s, "queued"), count(&s, "totalRecipients")),
        (0, 5000),
        "{s}"
    );
    let copies = tally(&smtp.received());
    let twice = copies.values().filter(|&&n| n > 1).count();
    assert!(
        twice <= 40,
        "only emails in flight at the kill may arrive twice ({twice} did)"
    );
    assert!(copies.values().all(|&n| n <= 2), "no third copy");
}

#[test]
fn kill_9_while_scheduled_sends_the_campaign_at_start_up_once_its_time_has_passed() {
    let (_dns, smtp, mut app, p) = rig(|_| {});
    let audience = emails("w", 3);
    contacts(&app, &p, &audience, true);
    let cid = id(&create(&app, &p, json!({})));
    let at = server_now(&app) + TimeDelta::milliseconds(2000);
    let c = data(
        &send(&app, &p, &cid, json!({ "scheduledAt": iso(at) })),
        200,
    );
    assert_eq!(c["status"], "SCHEDULED", "{c}");
    app.kill9();
    // The time passes on the real clock while the server is down (nothing to race: it
    // is not running).
    eventually(10, Utc::now, |now: &DateTime<Utc>| *now > at);
    assert!(
        Utc::now() > at,
        "the schedule fell due while the server was down"
    );
    assert_eq!(smtp.count(), 0, "nothing went out before the kill");
    app.restart();
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "delivered") == 3);
    assert_eq!(count(&s, "delivered"), 3, "{s}");
    let got = smtp.wait_for(3, wait());
    assert_eq!(rcpts(&got), audience, "each recipient once");
}

#[test]
fn a_marketing_template_sent_through_v1_send_carries_the_unsubscribe_link_and_skips_the_unsubscribed(
) {
    let (_dns, smtp, app, p) = rig(|_| {});
    let t = app.post(
        "/templates",
        &p.secret,
        json!({"name": "News", "subject": "News", "type": "MARKETING", "from": FROM,
               "body": "<p>Hi</p><p><a href=\"{{unsubscribeUrl}}\">leave</a></p>"}),
    );
    assert_eq!(t.status, 201, "{}", t.text);
    contacts(&app, &p, &["gone@example.com".to_owned()], false);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": ["reader@example.com", "gone@example.com"], "template": id(&t.json()),
               "subscribed": null}),
    );
    let sent = data(&r, 200);
    assert_eq!(sent["emails"][1]["skipped"], "unsubscribed", "{sent}");
    // A new recipient starts unsubscribed, so subscribe the reader first and send again.
    contacts(&app, &p, &["reader@example.com".to_owned()], true);
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "reader@example.com", "template": id(&t.json())}),
    );
    data(&r, 200);
    let got = smtp.wait_for(1, wait());
    assert_eq!(got.len(), 1, "only the subscribed reader gets it");
    let raw = got[0].text();
    let header = header_of(&raw, "List-Unsubscribe").expect("List-Unsubscribe");
    assert!(header.contains("/unsubscribe/"), "{header}");
    assert_eq!(
        header_of(&raw, "List-Unsubscribe-Post").as_deref(),
        Some("List-Unsubscribe=One-Click")
    );
    let html = html_of(&raw);
    assert!(
        !html.contains(">Unsubscribe</a>"),
        "the body placed the link itself, so no footer: {html}"
    );
    let path = link_path(&header, "/unsubscribe/").expect("an unsubscribe path");
    assert_eq!(
        visit(&app, "POST", &path, Some("List-Unsubscribe=One-Click")).status,
        200
    );
    assert_eq!(
        contact_of(&app, &p, "reader@example.com")["subscribed"],
        false
    );
}

#[test]
fn a_disabled_projects_campaign_waits_and_goes_out_once_the_project_is_enabled() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("d", 3), true);
    let cid = id(&create(&app, &p, json!({})));
    let at = iso(server_now(&app) + TimeDelta::milliseconds(60_000));
    data(&send(&app, &p, &cid, json!({ "scheduledAt": at })), 200);
    let admin = |path: String, body: Option<&str>| {
        let r = app.request("POST", &path, Some(ADMIN_TOKEN), body);
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    };
    // Another project on the same server, to send a control email while this one is
    // disabled (its own key is refused then).
    let other = app.create_project("Other");
    admin(
        format!("/admin/projects/{}/domains/trust", other.id),
        Some(r#"{"domain": "acme.test"}"#),
    );
    admin(format!("/admin/projects/{}/disable", p.id), None);
    advance(&app, 61_000);
    control(&app, &other, &smtp, "control@example.com");
    assert_eq!(campaign_mail(&smtp), 0, "nothing went out while disabled");
    admin(format!("/admin/projects/{}/enable", p.id), None);
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "delivered") == 3);
    assert_eq!(count(&s, "delivered"), 3, "all three once enabled: {s}");
}

#[test]
fn a_campaign_whose_sender_domain_went_away_waits_until_the_domain_is_back() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("w", 2), true);
    let cid = id(&create(&app, &p, json!({})));
    let at = iso(server_now(&app) + TimeDelta::milliseconds(60_000));
    data(&send(&app, &p, &cid, json!({ "scheduledAt": at })), 200);
    let domains = app.get("/domains", &p.secret).json();
    let domain = id(&domains["domains"][0]);
    assert_eq!(
        app.delete(&format!("/domains/{domain}"), &p.secret).status,
        204
    );
    advance(&app, 61_000);
    let c = campaign_when(&app, &p, &cid, "SENDING");
    assert_eq!(c["status"], "SENDING", "{c}");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "totalRecipients") == 2);
    assert_eq!(
        count(&s, "queued"),
        0,
        "nothing is queued without a sender: {s}"
    );
    let path = format!("/admin/projects/{}/domains/trust", p.id);
    let r = app.request(
        "POST",
        &path,
        Some(ADMIN_TOKEN),
        Some(r#"{"domain": "acme.test"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let got = smtp.wait_for(2, wait());
    assert_eq!(got.len(), 2, "both go out once the domain is back");
    assert_eq!(campaign_when(&app, &p, &cid, "SENT")["status"], "SENT");
}

#[test]
fn a_from_name_with_a_line_break_is_refused_on_create_and_on_patch() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        "/campaigns",
        &p.secret,
        campaign_body(json!({"fromName": "News\r\nBcc: all@example.com"})),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(
        r.field_codes(),
        [("fromName".to_owned(), "invalid_string".to_owned())]
    );
    let r = app.patch(
        &format!("/campaigns/{MISSING_ID}"),
        &p.secret,
        json!({"fromName": "A\u{0}B"}),
    );
    assert_eq!(
        r.status, 422,
        "a bad body is refused before the id is looked up: {}",
        r.text
    );
    assert_eq!(
        r.field_codes(),
        [("fromName".to_owned(), "invalid_string".to_owned())]
    );
}

#[test]
fn scheduling_a_campaign_whose_filter_matches_nobody_still_says_its_audience_is_empty() {
    let (_dns, _smtp, app, p) = rig(|s| s.limits.max_filter_evaluations = 10);
    for email in ["a@example.com", "b@example.com"] {
        app.upsert(&p.secret, json!({"email": email, "data": {"plan": "free"}}));
    }
    let at = iso(server_now(&app) + TimeDelta::milliseconds(60_000));
    let nobody = id(&create(
        &app,
        &p,
        json!({"type": "FILTERED", "audienceFilter": plan_is("pro")}),
    ));
    let r = send(&app, &p, &nobody, json!({ "scheduledAt": at }));
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.field_codes(), [("type".to_owned(), "custom".to_owned())]);
    assert!(r.text.contains("no subscribed contacts"), "{}", r.text);

    // Six conditions on two contacts are 12 evaluations, past the budget of 10.
    let conditions: Vec<Value> = (0..6)
        .map(|i| json!({"field": format!("data.k{i}"), "operator": "notIn", "value": [1, "2"]}))
        .collect();
    let costly = id(&create(
        &app,
        &p,
        json!({"type": "FILTERED", "audienceFilter": {"operator": "AND", "conditions": conditions}}),
    ));
    let r = send(&app, &p, &costly, json!({ "scheduledAt": at }));
    assert_over_filter_budget(&r, "audienceFilter");
    assert_eq!(campaign(&app, &p, &costly)["status"], "DRAFT");
}

/// A rig whose relay refuses every RCPT TO with a 451 until `clear_refusals`, and
/// whose retries wait ten minutes on the server's clock: the campaign's emails stay in
/// the outbox until the test lets them go (`release`). It logs at info level, with a
/// campaign's progress every second, and recounts /metrics' gauges on every scrape.
fn held_rig() -> (TestDns, SmtpServer, TestApp, Project) {
    let held = rig(|s| {
        s.sending.max_attempts = 100;
        s.sending.retry_base_ms = 600000;
        s.campaigns.progress_log_seconds = 1;
        s.log.level = "info".into();
        s.metrics.scan_interval_ms = 0;
    });
    held.1
        .keep_refusing(Stage::RcptTo, "451 4.3.0 Try again later");
    held
}

/// Lets held emails go: the relay accepts again and the clock passes their retry.
fn release(app: &TestApp, smtp: &SmtpServer) {
    smtp.clear_refusals();
    advance(app, 700_000);
}

/// The server's log so far, without terminal colours.
fn server_log(app: &TestApp) -> String {
    let raw = std::fs::read_to_string(app.data_dir.with_extension("log")).unwrap_or_default();
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence runs to its final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Waits (up to 30 s) for a line of the server's log that has every one of `parts`.
fn log_line(app: &TestApp, parts: &[&str]) -> Option<String> {
    let find = || {
        server_log(app)
            .lines()
            .find(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_owned)
    };
    eventually(30, find, Option::is_some)
}

#[test]
fn a_campaign_stays_sending_while_its_emails_wait_in_the_outbox_and_is_sent_once_the_last_one_goes()
{
    let (_dns, smtp, app, p) = held_rig();
    contacts(&app, &p, &emails("d", 5), true);
    let cid = id(&create(&app, &p, json!({})));
    data(&send(&app, &p, &cid, json!({})), 200);
    let s = stats_when(&app, &p, &cid, |s: &Value| {
        count(s, "totalRecipients") == 5 && count(s, "queued") == 5
    });
    assert_eq!(count(&s, "queued"), 5, "everyone is queued: {s}");
    assert!(
        smtp.wait_for(1, Duration::from_millis(1)).is_empty(),
        "nothing got through"
    );
    // Queued in full, yet the emails wait: still SENDING, whoever looks.
    for _ in 0..3 {
        let c = campaign(&app, &p, &cid);
        assert_eq!(c["status"], "SENDING", "{c}");
        assert!(c["sentAt"].is_null(), "{c}");
        assert_eq!(count(&stats(&app, &p, &cid), "queued"), 5);
    }
    let progress = log_line(&app, &["campaign progress", &cid, "queued=5"]);
    assert!(
        progress
            .as_deref()
            .is_some_and(|l| l.contains("seconds_left")),
        "the draining campaign logs its progress: {progress:?}"
    );
    assert_eq!(
        crate::support::metrics::metric(&app, "mailroom_campaigns_sending"),
        1.0
    );
    release(&app, &smtp);
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    assert!(c["sentAt"].is_string(), "{c}");
    let s = stats(&app, &p, &cid);
    assert_eq!(
        (count(&s, "queued"), count(&s, "delivered")),
        (0, 5),
        "SENT comes with the last email's outcome: {s}"
    );
    assert_eq!(rcpts(&smtp.wait_for(5, wait())).len(), 5);
    assert_eq!(
        crate::support::metrics::metric(&app, "mailroom_campaigns_sending"),
        0.0
    );
}

#[test]
fn cancelling_a_campaign_while_its_outbox_drains_drops_the_waiting_emails_and_sends_nothing_more() {
    let (_dns, smtp, app, p) = rig(|s| s.sending.rate_per_second = 2);
    contacts(&app, &p, &emails("q", 20), true);
    let cid = id(&create(&app, &p, json!({})));
    data(&send(&app, &p, &cid, json!({})), 200);
    let s = stats_when(&app, &p, &cid, |s: &Value| {
        count(s, "totalRecipients") == 20
    });
    assert_eq!(count(&s, "totalRecipients"), 20, "{s}");
    assert!(
        !smtp.wait_for(1, Duration::from_secs(30)).is_empty(),
        "sending started"
    );
    let (c, s) = (campaign(&app, &p, &cid), stats(&app, &p, &cid));
    assert!(count(&s, "queued") > 0, "the outbox still drains: {s}");
    assert_eq!(c["status"], "SENDING", "{c}");
    let c = data(&cancel(&app, &p, &cid), 200);
    assert_eq!(c["status"], "CANCELLED", "{c}");
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "queued") == 0);
    assert_eq!(count(&s, "queued"), 0, "{s}");
    assert!(count(&s, "cancelled") >= 1, "waiting emails dropped: {s}");
    control(&app, &p, &smtp, "control@example.com");
    let got = campaign_mail(&smtp) as u64;
    let s = stats(&app, &p, &cid);
    assert_eq!(count(&s, "delivered"), got, "{s}");
    assert_eq!(got + count(&s, "cancelled"), 20, "{s}");
    let c = campaign(&app, &p, &cid);
    assert_eq!(
        (c["status"].as_str(), c["sentAt"].is_null()),
        (Some("CANCELLED"), true),
        "{c}"
    );
}

#[test]
fn a_campaign_draining_at_a_kill_9_says_where_it_resumes_and_is_sent_once_its_outbox_empties() {
    let (_dns, smtp, mut app, p) = held_rig();
    contacts(&app, &p, &emails("k", 4), true);
    let cid = id(&create(&app, &p, json!({})));
    data(&send(&app, &p, &cid, json!({})), 200);
    stats_when(&app, &p, &cid, |s: &Value| {
        count(s, "totalRecipients") == 4 && count(s, "queued") == 4
    });
    app.kill9();
    app.restart();
    let resumed = log_line(&app, &["campaign resumes", &cid]);
    assert!(
        resumed.as_deref().is_some_and(|l| l.contains("queued=4")),
        "the log says where the campaign picks up: {resumed:?}"
    );
    assert_eq!(campaign(&app, &p, &cid)["status"], "SENDING");
    release(&app, &smtp);
    let c = campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(c["status"], "SENT", "{c}");
    assert!(c["sentAt"].is_string(), "{c}");
    let s = stats(&app, &p, &cid);
    assert_eq!((count(&s, "queued"), count(&s, "delivered")), (0, 4), "{s}");
}

#[test]
fn a_campaign_to_a_static_segment_reaches_its_subscribed_members_only() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("in", 3), true);
    contacts(&app, &p, &emails("left", 1), false);
    contacts(&app, &p, &emails("out", 2), true);
    let s = app.post(
        "/segments",
        &p.secret,
        json!({"name": "Chosen", "type": "STATIC"}),
    );
    assert_eq!(s.status, 201, "{}", s.text);
    let sid = s.json()["id"].as_str().unwrap().to_owned();
    let mut members = emails("in", 3);
    members.extend(emails("left", 1));
    let r = app.post(
        &format!("/segments/{sid}/members"),
        &p.secret,
        json!({ "emails": members }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let c = create(&app, &p, json!({"type": "SEGMENT", "segmentId": sid}));
    let (got, s) = send_and_settle(&app, &p, &smtp, &id(&c), 3);
    assert_eq!(
        rcpts(&got),
        emails("in", 3),
        "the subscribed members, once each"
    );
    assert_eq!(count(&s, "totalRecipients"), 3, "{s}");
}

#[test]
fn an_email_in_an_attempt_when_its_campaign_is_cancelled_is_not_retried_after() {
    let (_dns, smtp, app, p) = rig(|_| {});
    contacts(&app, &p, &emails("held", 1), true);
    // The relay takes DATA and never answers: the one email stays in its attempt.
    smtp.hang_in_data(true);
    let c = create(&app, &p, json!({}));
    let cid = id(&c);
    assert_eq!(send(&app, &p, &cid, json!({})).status, 200);
    let hung = eventually(20, || smtp.hung(), |n| *n >= 1);
    assert!(hung >= 1, "the attempt is under way");
    let r = cancel(&app, &p, &cid);
    assert_eq!(r.status, 200, "{}", r.text);
    // The relay answers again; the hung attempt times out, a transient failure that
    // would be retried (in 50 ms here) if the cancel had not taken it.
    smtp.hang_in_data(false);
    let s = stats_when(&app, &p, &cid, |s: &Value| count(s, "queued") == 0);
    assert_eq!(
        (count(&s, "cancelled"), count(&s, "delivered")),
        (1, 0),
        "{s}"
    );
    // The control: a later email does arrive, so a retry of the first would have too.
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "after@example.com", "from": FROM, "subject": "After", "body": "b"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let got = smtp.wait_for(1, wait());
    assert_eq!(
        rcpts(&got),
        ["after@example.com"],
        "nothing of the cancelled campaign"
    );
}

/// The fault hook (debug builds only) panics the campaign's runner once, right after
/// its first batch was queued: the supervisor restarts the runner, which resumes the
/// campaign from its stored cursor, so every recipient gets one email.
#[test]
fn a_campaign_whose_runner_panicked_after_a_batch_reaches_every_recipient_exactly_once() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.panic_once("campaign_batch");
        s.campaigns.batch_size = 4;
    });
    let mut audience = emails("r", 10);
    contacts(&app, &p, &audience, true);
    let cid = id(&create(&app, &p, json!({})));
    let (_, s) = send_and_settle(&app, &p, &smtp, &cid, 10);
    assert!(
        app.log().contains("injected fault at campaign_batch"),
        "the runner panicked after its first batch"
    );
    assert_eq!(
        (count(&s, "totalRecipients"), count(&s, "sent")),
        (10, 10),
        "{s}"
    );
    control(&app, &p, &smtp, "control@example.com");
    let copies = tally(&smtp.received());
    audience.push("control@example.com".into());
    audience.sort();
    assert!(
        copies.keys().eq(audience.iter()),
        "the audience and the control address: {copies:?}"
    );
    assert!(
        copies.values().all(|&n| n == 1),
        "one email each: {copies:?}"
    );
}
