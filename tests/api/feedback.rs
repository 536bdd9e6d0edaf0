//! Bounces and complaints a provider reports by HTTP (API.md 27), with payloads shaped
//! as Postmark, SendGrid and Mailgun document them, signed as each signs: what a report
//! does to the email, its campaign's stats, the contact, the suppression list and the
//! events (and so the event webhooks), once per report.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use base64::Engine;
use hmac::{Hmac, Mac};
use mailroom_testkit::{HookServer, Received};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::support::app::{Project, Resp, TestApp};
use crate::support::campaign::{
    contacts, count, create, data, emails, eventually, header_of, rig, send_and_settle, stats,
};

const MAILGUN_KEY: &str = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The email id in a received message's `Message-ID`, and the message's recipient.
fn sent_email(m: &Received) -> (String, String) {
    let id = header_of(&m.text(), "Message-ID").expect("a Message-ID");
    let id = id.trim().trim_start_matches('<');
    (
        id.split('@').next().unwrap().to_owned(),
        m.rcpt_to[0].clone(),
    )
}

fn mailgun_body(key: &str, ts: i64, event: Value) -> String {
    let token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0";
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(format!("{ts}{token}").as_bytes());
    let signature: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({
        "signature": {"timestamp": ts.to_string(), "token": token, "signature": signature},
        "event-data": event,
    })
    .to_string()
}

/// Mailgun's `failed` event of a permanent failure, as its documentation shows it.
fn mailgun_failed(id: &str, message_id: &str, to: &str) -> Value {
    json!({
        "event": "failed",
        "id": id,
        "timestamp": 1521233123.501324,
        "severity": "permanent",
        "reason": "bounce",
        "recipient": to,
        "message": {"headers": {"to": to, "message-id": message_id, "from": "hello@acme.test", "subject": "Spring"}},
        "delivery-status": {"attempt-no": 1, "code": 550, "enhanced-code": "5.1.1",
                            "description": "550 5.1.1 The email account that you tried to reach does not exist",
                            "session-seconds": 0.1}
    })
}

fn callback(app: &TestApp, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    app.request_with("POST", path, None, Some(body), headers)
}

fn suppressions(app: &TestApp, p: &Project) -> Value {
    let r = app.get("/suppressions", &p.secret);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn contact_subscribed(app: &TestApp, p: &Project, email: &str) -> bool {
    app.all_contacts(&p.secret)
        .iter()
        .find(|c| c["email"] == email)
        .and_then(|c| c["subscribed"].as_bool())
        .expect("the contact")
}

#[test]
fn a_mailgun_hard_bounce_of_a_delivered_campaign_email_moves_its_stats_unsubscribes_and_suppresses()
{
    let (_dns, smtp, app, p) = rig(|s| s.feedback.mailgun.signing_key = MAILGUN_KEY.into());
    contacts(&app, &p, &emails("in", 2), true);
    let c = create(&app, &p, json!({}));
    let cid = c["id"].as_str().unwrap().to_owned();
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 2);
    let (email_id, to) = sent_email(&got[0]);
    let message_id = format!("{email_id}@acme.test");
    let body = mailgun_body(
        MAILGUN_KEY,
        now_secs(),
        mailgun_failed("ev-1", &message_id, &to),
    );

    // A wrong key changes nothing.
    let forged = mailgun_body(
        "key-wrong",
        now_secs(),
        mailgun_failed("ev-1", &message_id, &to),
    );
    let r = callback(
        &app,
        "/feedback/mailgun",
        &[("content-type", "application/json")],
        &forged,
    );
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.code(), "INVALID_SIGNATURE");
    assert_eq!(suppressions(&app, &p)["total"], 0);
    // Nor does an old signature (a replay).
    let old = mailgun_body(
        MAILGUN_KEY,
        now_secs() - 3600,
        mailgun_failed("ev-1", &message_id, &to),
    );
    assert_eq!(callback(&app, "/feedback/mailgun", &[], &old).status, 401);

    let r = callback(
        &app,
        "/feedback/mailgun",
        &[("content-type", "application/json")],
        &body,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["applied"], 1, "{}", r.text);
    // Its signature (timestamp and token) over another body is a replay: refused.
    let mut swapped: Value = serde_json::from_str(&body).unwrap();
    swapped["event-data"]["event"] = json!("complained");
    let r = callback(&app, "/feedback/mailgun", &[], &swapped.to_string());
    assert_eq!(r.status, 401, "{}", r.text);
    let s = data(&app.get(&format!("/campaigns/{cid}/stats"), &p.secret), 200);
    assert_eq!(
        (count(&s, "delivered"), count(&s, "bounced")),
        (1, 1),
        "{s}"
    );
    let email = data(&app.get(&format!("/emails/{email_id}"), &p.secret), 200);
    assert_eq!(email["status"], "BOUNCED", "{email}");
    assert!(
        !contact_subscribed(&app, &p, &to),
        "the bounced contact is unsubscribed"
    );
    let list = suppressions(&app, &p);
    let entry = &list["suppressions"][0];
    assert_eq!(
        (entry["email"].as_str(), entry["reason"].as_str()),
        (Some(to.as_str()), Some("hard_bounce")),
        "{list}"
    );
    assert_eq!(entry["emailId"], email_id.as_str(), "{list}");
    let events = app
        .get(&format!("/events?name=email.bounce&email={to}"), &p.secret)
        .json();
    let ev = &events["events"][0];
    assert_eq!(ev["data"]["bounceType"], "HARD", "{events}");
    assert_eq!(ev["data"]["status"], "5.1.1", "{events}");
    assert!(
        ev["data"]["diagnostic"]
            .as_str()
            .unwrap_or_default()
            .contains("does not exist"),
        "{events}"
    );

    let st = app.get("/stats", &p.secret);
    assert_eq!(st.status, 200, "{}", st.text);
    let st = st.json();
    assert_eq!(
        (
            st["contacts"].as_u64(),
            st["subscribed"].as_u64(),
            st["suppressed"].as_u64()
        ),
        (Some(2), Some(1), Some(1)),
        "{st}"
    );
    assert_eq!(
        (st["bounceRate"].as_f64(), st["complaintRate"].as_f64()),
        (Some(0.5), Some(0.0)),
        "one of two sent: {st}"
    );
    // The same report again changes nothing more.
    let again = callback(&app, "/feedback/mailgun", &[], &body);
    assert_eq!(again.json()["duplicates"], 1, "{}", again.text);
    let s2 = stats(&app, &p, &cid);
    assert_eq!(
        (count(&s2, "delivered"), count(&s2, "bounced")),
        (1, 1),
        "{s2}"
    );
    assert_eq!(suppressions(&app, &p)["total"], 1);
    let events = app
        .get(&format!("/events?name=email.bounce&email={to}"), &p.secret)
        .json();
    assert_eq!(
        events["events"].as_array().map(Vec::len),
        Some(1),
        "{events}"
    );
    // A provider that is not configured is not there.
    assert_eq!(callback(&app, "/feedback/postmark", &[], "{}").status, 404);
    assert_eq!(callback(&app, "/feedback/sendgrid", &[], "[]").status, 404);
    assert_eq!(callback(&app, "/feedback/ses", &[], "{}").status, 404);
}

#[test]
fn the_bounce_pushes_an_event_webhook_with_its_type() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.feedback.mailgun.signing_key = MAILGUN_KEY.into();
        s.webhooks.allow_private_addresses = true;
    });
    let hooks = HookServer::start(200);
    let made = app.post(
        "/webhooks",
        &p.secret,
        json!({"url": hooks.url("/hook"), "events": ["email.bounce"]}),
    );
    assert_eq!(made.status, 201, "{}", made.text);
    let sent = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": "hello@acme.test", "subject": "Hi", "body": "<p>Hi</p>"}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    let got = smtp.wait_for(1, crate::support::campaign::wait());
    let (email_id, to) = sent_email(&got[0]);
    let body = mailgun_body(
        MAILGUN_KEY,
        now_secs(),
        mailgun_failed("ev-9", &format!("<{email_id}@acme.test>"), &to),
    );
    let r = callback(&app, "/feedback/mailgun", &[], &body);
    assert_eq!(r.json()["applied"], 1, "{}", r.text);
    let hits = eventually(20, || hooks.hits(), |h| !h.is_empty());
    assert_eq!(hits.len(), 1, "one email.bounce delivery");
    let payload: Value = serde_json::from_slice(&hits[0].body).unwrap();
    assert_eq!(payload["type"], "email.bounce", "{payload}");
    assert_eq!(payload["data"]["bounceType"], "HARD", "{payload}");
    assert_eq!(payload["data"]["emailId"], email_id.as_str(), "{payload}");
}

/// A P-256 key pair: the verification key as SendGrid shows it (base64 of its DER
/// SubjectPublicKeyInfo), and the pair that signs.
fn sendgrid_keys() -> (String, EcdsaKeyPair) {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let mut der = vec![
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ];
    der.extend_from_slice(pair.public_key().as_ref());
    (base64::engine::general_purpose::STANDARD.encode(der), pair)
}

fn sendgrid_signature(pair: &EcdsaKeyPair, ts: &str, body: &str) -> String {
    let signed = pair
        .sign(&SystemRandom::new(), format!("{ts}{body}").as_bytes())
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(signed.as_ref())
}

#[test]
fn a_signed_sendgrid_spam_report_counts_a_complaint_unsubscribes_and_suppresses() {
    let (public, pair) = sendgrid_keys();
    let (_dns, smtp, app, p) = rig(move |s| s.feedback.sendgrid.public_key = public);
    contacts(&app, &p, &emails("in", 2), true);
    let c = create(&app, &p, json!({}));
    let cid = c["id"].as_str().unwrap().to_owned();
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 2);
    let (email_id, to) = sent_email(&got[1]);
    let body = json!([
        {"email": to, "timestamp": now_secs(), "smtp-id": format!("<{email_id}@acme.test>"),
         "event": "delivered", "sg_event_id": "sg-delivered-1", "sg_message_id": "m1"},
        {"email": to, "timestamp": now_secs(), "smtp-id": format!("<{email_id}@acme.test>"),
         "event": "spamreport", "sg_event_id": "sg-spam-1", "sg_message_id": "m1"}
    ])
    .to_string();
    let ts = now_secs().to_string();
    let signature = sendgrid_signature(&pair, &ts, &body);
    let headers = |sig: &str| {
        vec![
            (
                "x-twilio-email-event-webhook-signature".to_owned(),
                sig.to_owned(),
            ),
            (
                "x-twilio-email-event-webhook-timestamp".to_owned(),
                ts.clone(),
            ),
        ]
    };
    let send = |h: Vec<(String, String)>, b: &str| {
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        callback(&app, "/feedback/sendgrid", &h, b)
    };
    // Another body under the same signature is refused.
    let tampered = body.replace("spamreport", "bounce");
    assert_eq!(send(headers(&signature), &tampered).status, 401);
    assert_eq!(send(headers("bm90IGEgc2lnbmF0dXJl"), &body).status, 401);
    assert_eq!(suppressions(&app, &p)["total"], 0);

    let r = send(headers(&signature), &body);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        (r.json()["reports"].as_u64(), r.json()["applied"].as_u64()),
        (Some(1), Some(1)),
        "the delivery is not a report: {}",
        r.text
    );
    let s = stats(&app, &p, &cid);
    assert_eq!(count(&s, "complained"), 1, "{s}");
    assert_eq!(
        count(&s, "delivered"),
        2,
        "a complaint is not a bounce: {s}"
    );
    assert!(!contact_subscribed(&app, &p, &to));
    assert_eq!(
        suppressions(&app, &p)["suppressions"][0]["reason"],
        "complaint"
    );
    let events = app
        .get(
            &format!("/events?name=email.complaint&email={to}"),
            &p.secret,
        )
        .json();
    assert_eq!(
        events["events"][0]["data"]["feedbackType"], "abuse",
        "{events}"
    );
    let unsub = app
        .get(
            &format!("/events?name=contact.unsubscribed&email={to}"),
            &p.secret,
        )
        .json();
    assert_eq!(unsub["events"][0]["data"]["reason"], "complaint", "{unsub}");
}

#[test]
fn three_postmark_soft_bounces_suppress_an_address_for_a_while_and_two_do_not() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.feedback.postmark.username = "postmark".into();
        s.feedback.postmark.password = "s3cret".into();
    });
    let sent = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "full@example.com", "from": "hello@acme.test", "subject": "Hi", "body": "<p>Hi</p>", "subscribed": true}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    let got = smtp.wait_for(1, crate::support::campaign::wait());
    let (email_id, to) = sent_email(&got[0]);
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("postmark:s3cret")
    );
    let wrong = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("postmark:guess")
    );
    let soft = |n: u32| {
        json!({"RecordType": "Bounce", "ID": 4323372036854775800u64 + n as u64, "Type": "SoftBounce", "TypeCode": 4096,
               "Name": "Soft bounce", "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "MessageStream": "outbound",
               "Description": "The server was unable to deliver your message (mailbox full)", "Details": "452 4.2.2 Mailbox full",
               "Email": to, "From": "hello@acme.test", "BouncedAt": "2026-11-28T16:33:54.9070259Z", "Inactive": false})
        .to_string()
    };
    assert_eq!(
        callback(
            &app,
            "/feedback/postmark",
            &[("authorization", &wrong)],
            &soft(1)
        )
        .status,
        401
    );
    assert_eq!(
        callback(&app, "/feedback/postmark", &[], &soft(1)).status,
        401
    );
    for n in 1..=2 {
        let r = callback(
            &app,
            "/feedback/postmark",
            &[("authorization", &auth)],
            &soft(n),
        );
        assert_eq!(r.json()["applied"], 1, "{}", r.text);
    }
    assert_eq!(
        suppressions(&app, &p)["total"],
        0,
        "two soft bounces are not enough"
    );
    assert!(
        contact_subscribed(&app, &p, &to),
        "a soft bounce does not unsubscribe"
    );
    let r = callback(
        &app,
        "/feedback/postmark",
        &[("authorization", &auth)],
        &soft(3),
    );
    assert_eq!(r.json()["applied"], 1, "{}", r.text);
    let list = suppressions(&app, &p);
    let entry = &list["suppressions"][0];
    assert_eq!(entry["reason"], "soft_bounce", "{list}");
    assert!(
        entry["expiresAt"].is_string(),
        "a soft suppression lifts: {list}"
    );
    let events = app
        .get(&format!("/events?name=email.bounce&email={to}"), &p.secret)
        .json();
    assert_eq!(
        events["events"].as_array().map(Vec::len),
        Some(3),
        "{events}"
    );
    assert_eq!(
        events["events"][0]["data"]["bounceType"], "SOFT",
        "{events}"
    );
    // Matched by recipient (Postmark's MessageID is its own), so no email is BOUNCED.
    let email = data(&app.get(&format!("/emails/{email_id}"), &p.secret), 200);
    assert_eq!(email["status"], "SENT", "{email}");
    let bad = callback(
        &app,
        "/feedback/postmark",
        &[("authorization", &auth)],
        "{not json",
    );
    assert_eq!(bad.status, 400, "{}", bad.text);
}

#[test]
fn a_campaign_past_its_bounce_rate_pauses_with_its_reason_and_resume_sends_the_rest() {
    let (_dns, smtp, app, p) = rig(|s| {
        s.campaigns.batch_size = 2;
        s.campaigns.queue_ahead = 2;
        s.campaigns.pause_after = 2;
        s.campaigns.pause_bounce_rate = 0.2;
    });
    contacts(&app, &p, &emails("in", 10), true);
    // Every recipient is refused until the relay is fixed.
    smtp.keep_refusing(mailroom_testkit::Stage::RcptTo, "550 5.1.1 No such user");
    let c = create(&app, &p, json!({}));
    let cid = c["id"].as_str().unwrap().to_owned();
    data(
        &crate::support::campaign::send(&app, &p, &cid, json!({})),
        200,
    );
    let paused = crate::support::campaign::campaign_when(&app, &p, &cid, "PAUSED");
    assert_eq!(paused["status"], "PAUSED", "{paused}");
    let reason = paused["pausedReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("bounce rate") && reason.contains("pause_bounce_rate"),
        "{paused}"
    );
    let s = stats(&app, &p, &cid);
    assert!(
        count(&s, "bounced") >= 2 && count(&s, "delivered") == 0,
        "{s}"
    );
    let queued_when_paused = count(&s, "bounced") + count(&s, "queued");
    assert!(queued_when_paused < 10, "the rest waits: {s}");

    // The dashboard says why, and resumes it; a second resume, or one of a DRAFT, is
    // a 409.
    let mut v = crate::dashboard::Visitor::new(&app);
    assert_eq!(v.sign_in(&p.secret).status, 303);
    let page = v.get(&format!("/app/campaigns/{cid}"));
    assert!(
        page.text.contains("paused-reason") && page.text.contains("bounce rate"),
        "{}",
        page.text
    );
    let csrf = crate::dashboard::hidden(&page.text, "csrf");
    smtp.clear_refusals();
    let resumed = v.post(&format!("/app/campaigns/{cid}/resume"), &[("csrf", &csrf)]);
    assert_eq!(resumed.status, 303, "{}", resumed.text);
    let resumed = data(&app.get(&format!("/campaigns/{cid}"), &p.secret), 200);
    assert!(resumed["pausedReason"].is_null(), "{resumed}");
    let again = app.post(&format!("/campaigns/{cid}/resume"), &p.secret, json!({}));
    assert_eq!(
        again.status, 409,
        "only a PAUSED campaign resumes: {}",
        again.text
    );
    let done = crate::support::campaign::campaign_when(&app, &p, &cid, "SENT");
    assert_eq!(done["status"], "SENT", "{done}");
    let s = stats(&app, &p, &cid);
    assert_eq!(
        count(&s, "delivered") + count(&s, "bounced"),
        10,
        "everyone once: {s}"
    );
    let draft = create(&app, &p, json!({"name": "Draft"}));
    let r = app.post(
        &format!("/campaigns/{}/resume", draft["id"].as_str().unwrap()),
        &p.secret,
        json!({}),
    );
    assert_eq!(r.status, 409, "{}", r.text);
}

#[test]
fn campaign_mail_carries_feedback_id_and_list_id_naming_the_campaign_and_project() {
    let (_dns, smtp, app, p) = rig(|s| s.feedback.sender_id = "acme-mail".into());
    contacts(&app, &p, &emails("in", 1), true);
    let c = create(&app, &p, json!({}));
    let cid = c["id"].as_str().unwrap().to_owned();
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 1);
    let raw = got[0].text();
    assert_eq!(
        header_of(&raw, "Feedback-ID"),
        Some(format!("{cid}:{}:campaign:acme-mail", p.id)),
        "{raw}"
    );
    let list = header_of(&raw, "List-Id").expect("a List-Id");
    assert!(
        list.starts_with(&format!("<{}.", p.id)) && list.ends_with('>'),
        "{list}"
    );
}

const SES_TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:ses-feedback";

/// An SNS publisher of our own: an RSA key, its certificate served over HTTPS by a
/// test CA's server, and messages signed as SNS signs them.
struct Sns {
    key: aws_lc_rs::rsa::KeyPair,
    files: mailroom_testkit::FileServer,
    ca_file: tempfile::NamedTempFile,
}

impl Sns {
    fn start() -> Sns {
        use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
        let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let der: Pkcs8V1Der = key.as_der().unwrap();
        let cert = mailroom_testkit::tls::rsa_certificate(der.as_ref(), "sns.us-east-1.test");
        let files = mailroom_testkit::FileServer::start(vec![
            (
                "/SimpleNotificationService-0123abcd.pem".into(),
                cert.into_bytes(),
            ),
            (
                "/confirm".into(),
                b"<ConfirmSubscriptionResponse/>".to_vec(),
            ),
        ]);
        let ca_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(ca_file.path(), files.ca_pem()).unwrap();
        Sns {
            key,
            files,
            ca_file,
        }
    }

    /// The fields SNS signs, in its documented order, each `name\nvalue\n`.
    fn sign(&self, m: &mut Value) {
        let order: &[&str] = if m["Type"] == "Notification" {
            &[
                "Message",
                "MessageId",
                "Subject",
                "Timestamp",
                "TopicArn",
                "Type",
            ]
        } else {
            &[
                "Message",
                "MessageId",
                "SubscribeURL",
                "Timestamp",
                "Token",
                "TopicArn",
                "Type",
            ]
        };
        let mut text = String::new();
        for k in order {
            if let Some(v) = m[*k].as_str() {
                text.push_str(&format!("{k}\n{v}\n"));
            }
        }
        // SignatureVersion 2; version 1 (SHA-1) has its vector in feedback::ses's tests.
        let alg = &aws_lc_rs::signature::RSA_PKCS1_SHA256;
        let mut sig = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(alg, &SystemRandom::new(), text.as_bytes(), &mut sig)
            .unwrap();
        m["Signature"] = json!(base64::engine::general_purpose::STANDARD.encode(sig));
    }

    fn message(&self, kind: &str, message: &str, version: &str) -> Value {
        let mut m = json!({
            "Type": kind,
            "MessageId": format!("sns-{}", rand_suffix()),
            "TopicArn": SES_TOPIC,
            "Message": message,
            "Timestamp": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            "SignatureVersion": version,
            "SigningCertURL": self.files.url("/SimpleNotificationService-0123abcd.pem"),
            "UnsubscribeURL": self.files.url("/unsubscribe"),
        });
        if kind != "Notification" {
            m["Token"] = json!("2336412f37fb687f5d51e6e2425f004aed");
            m["SubscribeURL"] = json!(self
                .files
                .url("/confirm?Action=ConfirmSubscription&Token=2336"));
        }
        self.sign(&mut m);
        m
    }
}

fn rand_suffix() -> String {
    mailroom_actors::model::EmailId::new().to_string()
}

/// SES's bounce notification, as its documentation shows it.
fn ses_bounce(message_id: &str, to: &str) -> String {
    json!({
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent", "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": to, "action": "failed", "status": "5.1.1",
                                   "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
            "timestamp": "2026-11-28T08:00:00.000Z",
            "feedbackId": "00000137860315fd-869464a4-8680-4114-98d3-716fe35851f9-000000"
        },
        "mail": {"timestamp": "2026-11-28T07:59:00.000Z", "source": "hello@acme.test",
                 "messageId": "00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000",
                 "destination": [to],
                 "commonHeaders": {"from": ["hello@acme.test"], "to": [to], "messageId": message_id}}
    })
    .to_string()
}

#[test]
fn ses_over_sns_confirms_its_subscription_and_applies_a_verified_bounce_and_complaint_once() {
    let sns = Sns::start();
    let (authority, ca) = (
        sns.files.authority(),
        sns.ca_file.path().display().to_string(),
    );
    let (_dns, smtp, app, p) = rig(move |s| {
        s.feedback.ses.topic_arns = vec![SES_TOPIC.into()];
        s.feedback.ses.cert_hosts = vec![authority];
        s.feedback.ses.ca_file = ca;
        s.feedback.ses.cert_subject = "sns.us-east-1.test".into();
        s.webhooks.allow_private_addresses = true;
    });
    let post = |m: &Value| {
        callback(
            &app,
            "/feedback/ses",
            &[("content-type", "text/plain; charset=UTF-8")],
            &m.to_string(),
        )
    };

    // SNS asks first: the subscription is confirmed by a GET of SubscribeURL.
    let r = post(&sns.message(
        "SubscriptionConfirmation",
        "You have chosen to subscribe",
        "2",
    ));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["subscribed"], true, "{}", r.text);
    assert!(
        sns.files
            .hits()
            .iter()
            .any(|(m, t)| m == "GET" && t.starts_with("/confirm?Action=ConfirmSubscription")),
        "{:?}",
        sns.files.hits()
    );

    contacts(&app, &p, &emails("in", 2), true);
    let c = create(&app, &p, json!({}));
    let cid = c["id"].as_str().unwrap().to_owned();
    let (got, _) = send_and_settle(&app, &p, &smtp, &cid, 2);
    let (bounced_id, bounced) = sent_email(&got[0]);
    let bounce = sns.message(
        "Notification",
        &ses_bounce(&format!("<{bounced_id}@acme.test>"), &bounced),
        "2",
    );

    // Refused: another message under the signature, a topic not listed, a certificate
    // from a host not allowed, a signature that is not one.
    let mut tampered = bounce.clone();
    tampered["Message"] = json!(ses_bounce("<other@acme.test>", "other@in.test"));
    assert_eq!(post(&tampered).status, 401);
    let mut topic = sns.message("Notification", &ses_bounce("<x@acme.test>", &bounced), "2");
    topic["TopicArn"] = json!("arn:aws:sns:us-east-1:123456789012:someone-else");
    sns.sign(&mut topic);
    let r = post(&topic);
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(r.text.contains("topic_arns"), "{}", r.text);
    let mut elsewhere = bounce.clone();
    elsewhere["SigningCertURL"] = json!("https://evil.test/SimpleNotificationService-x.pem");
    assert_eq!(post(&elsewhere).status, 401);
    // A message older than SNS's retries last, signed or not, is a replay.
    let mut old = bounce.clone();
    old["Timestamp"] = json!("2026-01-01T00:00:00.000Z");
    sns.sign(&mut old);
    assert_eq!(post(&old).status, 401);
    let mut unsigned = bounce.clone();
    unsigned["Signature"] = json!("bm90IGEgc2lnbmF0dXJl");
    assert_eq!(post(&unsigned).status, 401);
    assert_eq!(suppressions(&app, &p)["total"], 0);
    assert_eq!(post(&json!({"Type": "Notification"})).status, 400);

    let r = post(&bounce);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["applied"], 1, "{}", r.text);
    let again = post(&bounce);
    assert_eq!(again.json()["duplicates"], 1, "{}", again.text);
    let s = stats(&app, &p, &cid);
    assert_eq!(count(&s, "bounced"), 1, "{s}");
    let listed = suppressions(&app, &p);
    assert_eq!(
        listed["suppressions"][0]["reason"], "hard_bounce",
        "{listed}"
    );
    let events = app
        .get(
            &format!("/events?name=email.bounce&email={bounced}"),
            &p.secret,
        )
        .json();
    assert_eq!(events["events"][0]["data"]["source"], "ses", "{events}");
    assert_eq!(events["events"][0]["data"]["status"], "5.1.1", "{events}");

    // A complaint, its Message-ID among the headers SES kept.
    let (complained_id, complained) = sent_email(&got[1]);
    let complaint = json!({
        "notificationType": "Complaint",
        "complaint": {"complainedRecipients": [{"emailAddress": complained}],
                      "timestamp": "2026-11-28T08:01:00.000Z", "complaintFeedbackType": "abuse",
                      "feedbackId": "0000013786031775-163e3910-53eb-4c8e-a04a-f29debf88a84-000000"},
        "mail": {"messageId": "0000013786031775-fea503bc-7497-49e1-881b-a0379bb037d3-000000",
                 "headers": [{"name": "Message-ID", "value": format!("<{complained_id}@acme.test>")}]}
    })
    .to_string();
    let r = post(&sns.message("Notification", &complaint, "2"));
    assert_eq!(r.json()["applied"], 1, "{}", r.text);
    assert_eq!(count(&stats(&app, &p, &cid), "complained"), 1);
    assert!(!contact_subscribed(&app, &p, &complained));
    // The certificate was fetched once and kept.
    let fetched = sns
        .files
        .hits()
        .iter()
        .filter(|(_, t)| t.ends_with(".pem"))
        .count();
    assert_eq!(fetched, 1, "{:?}", sns.files.hits());
}
