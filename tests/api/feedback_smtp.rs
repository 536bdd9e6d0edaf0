//! Reports mailed to an email's return path (API.md 27): the envelope sender of each
//! email is `b-<token>@<return_path_domain>` (read here from the test SMTP server's
//! envelope), and the receiving SMTP server takes delivery reports (RFC 3464) and
//! complaints (RFC 5965) for valid tokens only, durably before its 250.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::app::{Project, TestApp};
use crate::support::campaign::{data, eventually, rig, wait, FROM};
use crate::support::settings::Setup;

const DOMAIN: &str = "bounces.acme.test";

fn with_return_path(s: &mut Setup) {
    s.feedback.return_path_domain = DOMAIN.into();
    s.feedback.smtp_listen = "127.0.0.1:0".into();
}

/// A plain SMTP client: each command, and the reply's code and text.
struct Smtp {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Smtp {
    fn connect(app: &TestApp) -> Smtp {
        let addr = app
            .printed("feedback SMTP listening on ")
            .expect("the server prints where the feedback SMTP server listens");
        let stream = TcpStream::connect(addr.trim()).expect("connect to the feedback server");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut s = Smtp {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert_eq!(s.reply().0, 220);
        s
    }

    fn reply(&mut self) -> (u16, String) {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("a reply");
            all.push_str(&line);
            if line.len() < 4 || line.as_bytes()[3] != b'-' {
                let code = line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
                return (code, all);
            }
        }
    }

    fn cmd(&mut self, line: &str) -> (u16, String) {
        self.writer
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        self.reply()
    }

    /// MAIL, RCPT and DATA for `message`; the reply to its end.
    fn mail(&mut self, rcpt: &str, message: &str) -> (u16, String) {
        assert_eq!(self.cmd("MAIL FROM:<>").0, 250);
        let r = self.cmd(&format!("RCPT TO:<{rcpt}>"));
        assert_eq!(r.0, 250, "{r:?}");
        assert_eq!(self.cmd("DATA").0, 354);
        let mut body = String::new();
        for line in message.split("\r\n") {
            if line.starts_with('.') {
                body.push('.');
            }
            body.push_str(line);
            body.push_str("\r\n");
        }
        self.writer.write_all(body.as_bytes()).unwrap();
        self.cmd(".")
    }
}

fn dsn(recipient: &str, action: &str, status: &str, note: &str) -> String {
    format!(
        "From: MAILER-DAEMON@mx.example.com\r\nTo: bounce@{DOMAIN}\r\nSubject: Undelivered Mail Returned to Sender\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"R\"\r\n\r\n\
         --R\r\nContent-Type: text/plain\r\n\r\nThis is the mail system at host mx.example.com. {note}\r\n\
         --R\r\nContent-Type: message/delivery-status\r\n\r\n\
         Reporting-MTA: dns; mx.example.com\r\nArrival-Date: Sat, 28 Nov 2026 10:00:00 +0000 ({note})\r\n\r\n\
         Final-Recipient: rfc822; {recipient}\r\nOriginal-Recipient: rfc822; {recipient}\r\nAction: {action}\r\n\
         Status: {status}\r\nRemote-MTA: dns; mx.example.com\r\nDiagnostic-Code: smtp; 550 {status} user unknown\r\n\r\n\
         --R\r\nContent-Type: text/rfc822-headers\r\n\r\nSubject: Hi\r\n\r\n--R--"
    )
}

fn arf(recipient: &str) -> String {
    format!(
        "From: fbl@isp.example\r\nTo: fbl@{DOMAIN}\r\nSubject: Complaint\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=feedback-report; boundary=\"F\"\r\n\r\n\
         --F\r\nContent-Type: text/plain\r\n\r\nThis is an email abuse report.\r\n\
         --F\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nUser-Agent: SomeFBL/1.0\r\n\
         Version: 1\r\nOriginal-Rcpt-To: {recipient}\r\nArrival-Date: Sat, 28 Nov 2026 10:00:00 +0000\r\n\r\n\
         --F\r\nContent-Type: message/rfc822\r\n\r\nFrom: {FROM}\r\nSubject: Hi\r\n\r\nHi\r\n--F--"
    )
}

/// Sends one email to `to`; its id and its envelope sender, as the relay saw them.
fn send_one(
    app: &TestApp,
    p: &Project,
    smtp: &mailroom_testkit::SmtpServer,
    to: &str,
    n: usize,
) -> (String, String) {
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": FROM, "subject": "Hi", "body": "<p>Hi</p>", "subscribed": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let got = smtp.wait_for(n, wait());
    let m = got
        .iter()
        .find(|m| m.rcpt_to[0] == to)
        .expect("the email arrived");
    // The relay has it, and its outcome is written: a report that came before the
    // outcome's write would be overwritten by it (a real report comes much later).
    let sent = eventually(
        wait().as_secs(),
        || data(&app.get(&format!("/emails/{id}"), &p.secret), 200),
        |e| e["status"] == "SENT",
    );
    assert_eq!(sent["status"], "SENT", "{sent}");
    (id, m.mail_from.clone())
}

fn events(app: &TestApp, p: &Project, name: &str, email: &str) -> Vec<Value> {
    app.get(&format!("/events?name={name}&email={email}"), &p.secret)
        .json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn metric(app: &TestApp, line: &str) -> bool {
    let r = app.request("GET", "/metrics", None, None);
    r.text.lines().any(|l| l == line)
}

#[test]
fn a_delivery_report_mailed_to_an_emails_return_path_bounces_it_once() {
    let (_dns, smtp, app, p) = rig(with_return_path);
    let (id, envelope) = send_one(&app, &p, &smtp, "ada@example.com", 1);
    assert!(
        envelope.starts_with("b-")
            && envelope.ends_with(&format!("@{DOMAIN}"))
            && envelope.len() < 64 + DOMAIN.len(),
        "the envelope sender is the email's return path: {envelope}"
    );
    let (_, other) = send_one(&app, &p, &smtp, "bo@example.com", 2);
    assert_ne!(envelope, other, "a return path per email");

    let mut s = Smtp::connect(&app);
    assert_eq!(s.cmd("EHLO mx.example.com").0, 250);
    assert_eq!(s.cmd("MAIL FROM:<>").0, 250);
    // A forged token, and an address of another domain, are refused before any data.
    let mut forged = envelope.clone().into_bytes();
    forged[6] = if forged[6] == b'a' { b'b' } else { b'a' };
    assert_eq!(
        s.cmd(&format!("RCPT TO:<{}>", String::from_utf8(forged).unwrap()))
            .0,
        550
    );
    assert_eq!(s.cmd("RCPT TO:<postmaster@acme.test>").0, 550);
    assert_eq!(s.cmd("RSET").0, 250);
    // The report names another address: the email's own recipient is what it bounces.
    let report = dsn("someone-else@example.com", "failed", "5.1.1", "first");
    let r = s.mail(&envelope, &report);
    assert_eq!(r.0, 250, "{r:?}");

    let email = data(&app.get(&format!("/emails/{id}"), &p.secret), 200);
    assert_eq!(email["status"], "BOUNCED", "{email}");
    let list = app.get("/suppressions", &p.secret).json();
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(
        list["suppressions"][0]["email"], "ada@example.com",
        "{list}"
    );
    assert_eq!(list["suppressions"][0]["reason"], "hard_bounce", "{list}");
    let bounces = events(&app, &p, "email.bounce", "ada@example.com");
    assert_eq!(bounces.len(), 1);
    assert_eq!(bounces[0]["data"]["bounceType"], "HARD");
    assert_eq!(bounces[0]["data"]["status"], "5.1.1");
    assert_eq!(bounces[0]["data"]["source"], "smtp");

    // The same report again (an MTA that retried) changes nothing more.
    assert_eq!(s.mail(&envelope, &report).0, 250);
    assert_eq!(events(&app, &p, "email.bounce", "ada@example.com").len(), 1);
    assert!(
        metric(&app, "mailroom_feedback_total{outcome=\"hard\"} 1"),
        "counted once"
    );
    assert_eq!(s.cmd("QUIT").0, 221);
}

#[test]
fn an_arf_complaint_suppresses_an_auto_reply_is_dropped_and_garbage_is_quarantined() {
    let (_dns, smtp, app, p) = rig(with_return_path);
    let (_, envelope) = send_one(&app, &p, &smtp, "ada@example.com", 1);
    let mut s = Smtp::connect(&app);
    assert_eq!(s.cmd("HELO mx").0, 250);
    let auto = "From: ada@example.com\r\nSubject: Out of office\r\nAuto-Submitted: auto-replied\r\n\r\nAway until Monday.";
    assert_eq!(s.mail(&envelope, auto).0, 250);
    assert!(metric(&app, "mailroom_feedback_total{outcome=\"other\"} 1"));
    assert_eq!(app.get("/suppressions", &p.secret).json()["total"], 0);

    let broken = dsn("ada@example.com", "failed", "five-one-one", "broken");
    assert_eq!(s.mail(&envelope, &broken).0, 250, "kept, not refused");
    assert!(metric(
        &app,
        "mailroom_feedback_total{outcome=\"quarantined\"} 1"
    ));
    assert_eq!(
        app.get("/suppressions", &p.secret).json()["total"],
        0,
        "not guessed at"
    );

    assert_eq!(s.mail(&envelope, &arf("ada@example.com")).0, 250);
    let list = app.get("/suppressions", &p.secret).json();
    assert_eq!(list["suppressions"][0]["reason"], "complaint", "{list}");
    let complaints = events(&app, &p, "email.complaint", "ada@example.com");
    assert_eq!(
        complaints[0]["data"]["feedbackType"], "abuse",
        "{complaints:?}"
    );
}

#[test]
fn three_soft_bounces_by_mail_suppress_the_address_for_a_while() {
    let (_dns, smtp, app, p) = rig(with_return_path);
    // Three emails to one address, each deferred for good (one soft bounce per email
    // counts, however often its MTA reports it).
    let mut sent = Vec::new();
    for n in 1..=3 {
        let r = app.post(
            "/v1/send",
            &p.secret,
            json!({"to": "full@example.com", "from": FROM, "subject": "Hi", "body": "<p>Hi</p>", "subscribed": true}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        sent.push(
            r.json()["data"]["emails"][0]["email"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        smtp.wait_for(n, wait());
    }
    let envelopes: Vec<String> = smtp
        .received()
        .iter()
        .map(|m| m.mail_from.clone())
        .collect();
    assert_eq!(envelopes.len(), 3);
    let mut s = Smtp::connect(&app);
    assert_eq!(s.cmd("EHLO mx").0, 250);
    for (n, envelope) in envelopes.iter().enumerate() {
        if n == 2 {
            assert_eq!(
                app.get("/suppressions", &p.secret).json()["total"],
                0,
                "two are not enough"
            );
            // The same email's report again is not a third.
            let again = dsn("full@example.com", "failed", "4.2.2", "again");
            assert_eq!(s.mail(&envelopes[0], &again).0, 250);
            assert_eq!(
                app.get("/suppressions", &p.secret).json()["total"],
                0,
                "one per email"
            );
        }
        let report = dsn("full@example.com", "failed", "4.2.2", &format!("try {n}"));
        assert_eq!(s.mail(envelope, &report).0, 250);
    }
    let list = app.get("/suppressions", &p.secret).json();
    assert_eq!(list["suppressions"][0]["reason"], "soft_bounce", "{list}");
    assert!(list["suppressions"][0]["expiresAt"].is_string(), "{list}");
    let email = data(&app.get(&format!("/emails/{}", sent[0]), &p.secret), 200);
    assert_eq!(
        email["status"], "SENT",
        "a soft bounce leaves the email as it was: {email}"
    );
    assert_eq!(
        events(&app, &p, "email.bounce", "full@example.com").len(),
        3
    );
}

#[test]
fn a_report_past_the_size_limit_is_refused_and_the_session_goes_on() {
    let (_dns, smtp, app, p) = rig(|s| {
        with_return_path(s);
        s.feedback.max_message_bytes = 64 * 1024;
    });
    let (_, envelope) = send_one(&app, &p, &smtp, "ada@example.com", 1);
    let mut s = Smtp::connect(&app);
    let ehlo = s.cmd("EHLO mx");
    assert!(ehlo.1.contains("SIZE 65536"), "{ehlo:?}");
    assert_eq!(
        s.cmd("MAIL FROM:<> SIZE=10485760").0,
        552,
        "refused up front when announced"
    );
    let big = format!(
        "Subject: big\r\n\r\n{}",
        vec!["x".repeat(900); 100].join("\r\n")
    );
    assert_eq!(s.mail(&envelope, &big).0, 552, "and when it is not");
    assert_eq!(s.cmd("NOOP").0, 250, "the session is still usable");
    let ok = s.mail(
        &envelope,
        &dsn("ada@example.com", "failed", "5.1.1", "small"),
    );
    assert_eq!(ok.0, 250, "{ok:?}");
    // A command line past 1,000 bytes ends the session (its rest is never read).
    let long_line = format!("{} {}", "NOOP", "y".repeat(5000));
    assert_eq!(s.cmd(&long_line).0, 500);
    let mut rest = String::new();
    assert_eq!(
        s.reader.read_line(&mut rest).unwrap_or(0),
        0,
        "closed: {rest:?}"
    );
    let mut next = Smtp::connect(&app);
    assert_eq!(next.cmd("NOOP").0, 250, "a new session is served");
}

#[test]
fn a_report_answered_250_survives_a_kill_9() {
    let (_dns, smtp, mut app, p) = rig(with_return_path);
    let (id, envelope) = send_one(&app, &p, &smtp, "ada@example.com", 1);
    let mut s = Smtp::connect(&app);
    assert_eq!(s.cmd("EHLO mx").0, 250);
    assert_eq!(
        s.mail(
            &envelope,
            &dsn("ada@example.com", "failed", "5.1.1", "durable")
        )
        .0,
        250
    );
    app.kill9();
    app.restart();
    let email = data(&app.get(&format!("/emails/{id}"), &p.secret), 200);
    assert_eq!(email["status"], "BOUNCED", "{email}");
    assert_eq!(app.get("/suppressions", &p.secret).json()["total"], 1);
    assert_eq!(events(&app, &p, "email.bounce", "ada@example.com").len(), 1);
}

/// Reads one SMTP reply (its lines) from `r`.
fn reply_of(r: &mut impl std::io::Read) -> (u16, String) {
    let mut all = String::new();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        assert_eq!(r.read(&mut byte).expect("a reply"), 1, "closed: {all}");
        line.push(byte[0]);
        if byte[0] == b'\n' {
            let text = String::from_utf8_lossy(&line).into_owned();
            all.push_str(&text);
            line.clear();
            if text.len() < 4 || text.as_bytes()[3] != b'-' {
                return (text.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0), all);
            }
        }
    }
}

fn say(s: &mut (impl std::io::Read + std::io::Write), line: &str) -> (u16, String) {
    s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    s.flush().unwrap();
    reply_of(s)
}

#[test]
fn with_a_certificate_the_server_offers_starttls_and_takes_a_report_over_it() {
    use std::sync::Arc;
    let certs = mailroom_testkit::tls::TestCertificates::generate();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, &certs.cert_pem).unwrap();
    std::fs::write(&key, &certs.key_pem).unwrap();
    let (cert_path, key_path) = (cert.display().to_string(), key.display().to_string());
    let (_dns, smtp, app, p) = rig(move |s| {
        with_return_path(s);
        s.feedback.tls_cert = cert_path;
        s.feedback.tls_key = key_path;
    });
    let (id, envelope) = send_one(&app, &p, &smtp, "ada@example.com", 1);
    let addr = app.printed("feedback SMTP listening on ").unwrap();
    let mut tcp = TcpStream::connect(addr.trim()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(reply_of(&mut tcp).0, 220);
    let ehlo = say(&mut tcp, "EHLO mx.example.com");
    assert!(ehlo.1.contains("STARTTLS"), "offered: {ehlo:?}");
    assert_eq!(say(&mut tcp, "STARTTLS").0, 220);

    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(certs.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let ehlo = say(&mut tls, "EHLO mx.example.com");
    assert_eq!(ehlo.0, 250, "{ehlo:?}");
    assert!(!ehlo.1.contains("STARTTLS"), "not offered twice: {ehlo:?}");
    assert_eq!(say(&mut tls, "MAIL FROM:<>").0, 250);
    assert_eq!(say(&mut tls, &format!("RCPT TO:<{envelope}>")).0, 250);
    assert_eq!(say(&mut tls, "DATA").0, 354);
    let report = dsn("ada@example.com", "failed", "5.1.1", "over TLS");
    let done = say(&mut tls, &format!("{report}\r\n."));
    assert_eq!(done.0, 250, "{done:?}");
    let email = data(&app.get(&format!("/emails/{id}"), &p.secret), 200);
    assert_eq!(email["status"], "BOUNCED", "{email}");
}

#[test]
fn a_feedback_server_that_cannot_work_stops_the_start_saying_why() {
    let said =
        crate::support::app::refused_start(|s| s.feedback.smtp_listen = "127.0.0.1:0".into());
    assert!(said.contains("feedback.return_path_domain"), "{said}");
    let said = crate::support::app::refused_start(|s| {
        with_return_path(s);
        s.feedback.tls_cert = "/nonexistent/cert.pem".into();
    });
    assert!(said.contains("go together"), "{said}");
    let said = crate::support::app::refused_start(|s| {
        with_return_path(s);
        s.feedback.tls_cert = "/nonexistent/cert.pem".into();
        s.feedback.tls_key = "/nonexistent/key.pem".into();
    });
    assert!(
        said.contains("feedback.tls_cert /nonexistent/cert.pem"),
        "{said}"
    );
}

#[test]
fn a_report_to_one_projects_token_never_touches_another_project() {
    let (_dns, smtp, app, a) = rig(with_return_path);
    let b = app.create_project("Other");
    let bo = app.upsert(
        &b.secret,
        json!({"email": "bo@example.com", "subscribed": true}),
    );
    let (id, envelope) = send_one(&app, &a, &smtp, "ada@example.com", 1);
    let mut s = Smtp::connect(&app);
    assert_eq!(s.cmd("EHLO mx").0, 250);
    // A's token, a report that names B's contact (and a thousand-recipient one).
    assert_eq!(
        s.mail(
            &envelope,
            &dsn("bo@example.com", "failed", "5.1.1", "cross")
        )
        .0,
        250
    );
    let many: String = (0..1000)
        .map(|i| format!("Final-Recipient: rfc822; r{i}@example.com\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n"))
        .collect();
    let huge = dsn("bo@example.com", "failed", "5.1.1", "many").replace(
        "Final-Recipient: rfc822; bo@example.com",
        &format!("{many}Final-Recipient: rfc822; bo@example.com"),
    );
    assert_eq!(s.mail(&envelope, &huge).0, 250, "kept, not applied");
    assert!(metric(
        &app,
        "mailroom_feedback_total{outcome=\"quarantined\"} 1"
    ));
    // A's email bounced, A's list has A's recipient; B is as it was.
    let email = data(&app.get(&format!("/emails/{id}"), &a.secret), 200);
    assert_eq!(email["status"], "BOUNCED", "{email}");
    let listed = app.get("/suppressions", &a.secret).json();
    assert_eq!(
        listed["suppressions"][0]["email"], "ada@example.com",
        "{listed}"
    );
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(app.get("/suppressions", &b.secret).json()["total"], 0);
    let b_contact = app
        .get(
            &format!("/contacts/{}", bo["id"].as_str().unwrap()),
            &b.secret,
        )
        .json();
    assert_eq!(b_contact["subscribed"], true, "{b_contact}");
    assert_eq!(events(&app, &b, "email.bounce", "bo@example.com").len(), 0);
}

#[test]
fn a_verified_psrp_cname_moves_the_envelope_sender_under_the_sender_domain_and_reports_to_it_still_apply(
) {
    let (dns, smtp, app, p) = rig(with_return_path);
    let domains = app.get("/domains", &p.secret).json();
    let d = &domains["domains"][0];
    let record = d["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["purpose"] == "RETURN_PATH")
        .cloned()
        .unwrap_or_else(|| panic!("a RETURN_PATH record: {d}"));
    assert_eq!(
        (&record["type"], &record["name"], &record["value"]),
        (&json!("CNAME"), &json!("psrp.acme.test"), &json!(DOMAIN)),
        "{record}"
    );
    assert_eq!(record["verified"], false);

    // Not published yet: the envelope sender stays on the return path's own domain.
    let (_, before) = send_one(&app, &p, &smtp, "ada@in.test", 1);
    assert!(before.ends_with(&format!("@{DOMAIN}")), "{before}");

    // A CNAME elsewhere does not count; one to the return path's domain does.
    let verify = || {
        let id = d["id"].as_str().unwrap();
        let r = app.post(&format!("/domains/{id}/verify"), &p.secret, json!({}));
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["purpose"] == "RETURN_PATH")
            .map(|r| r["verified"] == true)
            .unwrap()
    };
    dns.set_cname("psrp.acme.test", "bounces.elsewhere.test");
    assert!(!verify(), "a CNAME to another host is not the return path");
    dns.set_cname("psrp.acme.test", DOMAIN);
    assert!(
        verify(),
        "the CNAME to the return path's domain verifies it"
    );

    let (id, after) = send_one(&app, &p, &smtp, "grace@in.test", 2);
    assert!(
        after.starts_with("b-") && after.ends_with("@psrp.acme.test"),
        "SPF aligned with the From domain: {after}"
    );
    // A report to the aligned address finds its email like any other.
    let mut s = Smtp::connect(&app);
    assert_eq!(s.cmd("EHLO mx.example.com").0, 250);
    let r = s.mail(&after, &dsn("grace@in.test", "failed", "5.1.1", "aligned"));
    assert_eq!(r.0, 250, "{r:?}");
    let email = data(&app.get(&format!("/emails/{id}"), &p.secret), 200);
    assert_eq!(email["status"], "BOUNCED", "{email}");
    // A forged token at an aligned host is refused like any other.
    assert_eq!(s.cmd("MAIL FROM:<>").0, 250);
    let forged = format!("b-{}@psrp.acme.test", "a".repeat(39));
    assert_eq!(s.cmd(&format!("RCPT TO:<{forged}>")).0, 550);
}
