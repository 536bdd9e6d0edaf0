//! Acknowledged writes survive `kill -9`; SIGTERM shuts down cleanly.

use serde_json::json;

use crate::support::app::TestApp;

#[test]
fn kill_9_right_after_500_acknowledged_upserts_loses_none_of_them() {
    let mut app = TestApp::spawn_with(|s| s.limits.requests_per_minute = 0);
    let p = app.create_project("Acme");
    std::thread::scope(|s| {
        for t in 0..4 {
            let (app, key) = (&app, &p.secret);
            s.spawn(move || {
                for i in 0..125 {
                    let r = app.post(
                        "/contacts",
                        key,
                        json!({"email": format!("k{t}-{i}@example.com")}),
                    );
                    assert_eq!(r.status, 201);
                }
            });
        }
    });
    app.kill9();
    app.restart();
    let emails = app.all_emails(&p.secret);
    assert_eq!(emails.len(), 500);
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 500);
    let c = app.upsert(&p.secret, json!({"email": "k3-124@example.com"}));
    assert_eq!(c["_meta"]["isNew"], false, "the index survived too");
}

#[test]
fn sigterm_finishes_and_exits_zero_and_the_data_is_there_after_a_restart() {
    let mut app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(&p.secret, json!({"email": "a@example.com"}));
    let pid = app.child_pid();
    let mut child = app.take_child();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "graceful shutdown exits 0");
    app.restart();
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 1);
}

#[test]
fn an_idempotent_send_replays_its_first_answer_after_kill_9_and_sends_nothing_more() {
    let (dns, smtp) = (
        crate::dns::TestDns::start(),
        mailroom_testkit::SmtpServer::start(),
    );
    let (mut app, p) = crate::support::relay::app_with(&dns, &smtp, |_| {});
    let body = json!({"to": "ada@example.com", "from": "a@acme.test", "subject": "Once",
                      "body": "<p>Once</p>"})
    .to_string();
    let send = |app: &TestApp| {
        app.request_with(
            "POST",
            "/v1/send",
            Some(&p.secret),
            Some(&body),
            &[("Idempotency-Key", "order-42")],
        )
    };
    let first = send(&app);
    assert_eq!(first.status, 200, "{}", first.text);
    smtp.wait_for(1, std::time::Duration::from_secs(20));
    app.kill9();
    app.restart();
    let again = send(&app);
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        again.json()["data"],
        first.json()["data"],
        "the first answer, replayed"
    );
    // A later, different send is the positive control: once it has arrived, a second
    // copy of the first would have too.
    let other = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "bo@example.com", "from": "a@acme.test", "subject": "Other", "body": "b"}),
    );
    assert_eq!(other.status, 200, "{}", other.text);
    let got = eventually_received(&smtp, "bo@example.com");
    // The first email may go out again if the crash came between the relay's answer and
    // the write of its outcome (the few in flight at a crash); it is then the same email,
    // with the same Message-ID. The replay must not have made a new one.
    let email_id = first.json()["data"]["emails"][0]["email"]
        .as_str()
        .expect("the email's id")
        .to_owned();
    let ids: std::collections::BTreeSet<String> = got
        .iter()
        .filter(|m| m.rcpt_to == ["ada@example.com"])
        .map(|m| crate::support::campaign::header_of(&m.text(), "Message-ID").unwrap_or_default())
        .collect();
    assert_eq!(ids.len(), 1, "one email to ada, not two: {ids:?}");
    assert!(
        ids.iter().all(|id| id.contains(&email_id)),
        "{ids:?} is {email_id}"
    );
}

/// What the relay has received once a message to `to` is among it (20 s at most).
fn eventually_received(
    smtp: &mailroom_testkit::SmtpServer,
    to: &str,
) -> Vec<mailroom_testkit::Received> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let got = smtp.received();
        if got.iter().any(|m| m.rcpt_to == [to]) || std::time::Instant::now() >= deadline {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Recipients of the campaign that SIGTERM interrupts.
const RECIPIENTS: usize = 2_000;

#[test]
fn sigterm_during_a_2000_recipient_campaign_exits_zero_and_after_a_restart_each_recipient_gets_exactly_one_email(
) {
    use crate::support::campaign::{create, data, eventually, header_of, id};
    // Unpaced, so that many emails (`sending.max_in_flight`) are in an SMTP attempt at
    // once when the signal comes: those are the ones a stop that does not wait for
    // their outcomes sends twice.
    let (_dns, smtp, mut app, p) = crate::support::campaign::rig(|s| {
        s.sending.max_in_flight = 32;
        s.server.shutdown_timeout_seconds = 20;
        s.log.level = "info".into();
    });
    let mut csv = String::from("email\n");
    for i in 0..RECIPIENTS {
        csv.push_str(&format!("r{i}@example.com\n"));
    }
    let import = crate::support::imports::import(&app, &p.secret, &csv);
    crate::support::imports::finished(&app, &p.secret, &import);
    let cid = id(&create(&app, &p, json!({"name": "Big"})));
    let r = app.post(&format!("/campaigns/{cid}/send"), &p.secret, json!({}));
    data(&r, 200);
    let before = smtp.wait_for(300, std::time::Duration::from_secs(60)).len();
    assert!(
        before >= 300,
        "only {before} emails arrived before the stop"
    );

    let stopping = std::time::Instant::now();
    let exit = app.sigterm(std::time::Duration::from_secs(25));
    let at_stop = smtp.received().len();
    eprintln!(
        "SIGTERM after {before} emails; exited in {:?} with {at_stop} arrived",
        stopping.elapsed()
    );
    assert_eq!(
        exit.and_then(|e| e.code()),
        Some(0),
        "a clean stop exits 0 within server.shutdown_timeout_seconds"
    );
    assert!(
        at_stop < RECIPIENTS,
        "the campaign was still sending when the signal came ({at_stop} arrived)"
    );

    app.restart();
    let c = eventually(
        180,
        || data(&app.get(&format!("/campaigns/{cid}"), &p.secret), 200),
        |c| c["status"] == "SENT",
    );
    assert_eq!(c["status"], "SENT", "{c}");
    let got = smtp.wait_for(RECIPIENTS, std::time::Duration::from_secs(30));
    let mut copies = std::collections::BTreeMap::<String, usize>::new();
    for m in &got {
        *copies.entry(m.rcpt_to.join(",")).or_default() += 1;
    }
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "recipients mailed more than once: {twice:?}"
    );
    assert_eq!(copies.len(), RECIPIENTS, "every recipient got the campaign");
    assert_eq!(got.len(), RECIPIENTS, "one email each, nothing more");
    let ids: std::collections::BTreeSet<String> = got
        .iter()
        .map(|m| header_of(&m.text(), "Message-ID").unwrap_or_default())
        .collect();
    assert_eq!(
        ids.len(),
        RECIPIENTS,
        "a Message-ID of its own for each recipient"
    );
    let log = app.log();
    let drained: Vec<&str> = log.lines().filter(|l| l.contains("drain")).collect();
    eprintln!("{}", drained.join("\n"));
    assert!(
        log.contains("drained: every email handed to the relay has its outcome written"),
        "the stop logs its drain:\n{log}"
    );
}
