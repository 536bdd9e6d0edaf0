//! The `feedback` scenario (issue #34): `/v1/send` with a return path per email beside
//! without one, in the same run, and delivery reports per second through the receiving
//! SMTP server (`feedback.smtp_listen`), each report a durable write before its 250.

use std::time::{Duration, Instant};

use mailroom_testkit::{SmtpServer, TestDns};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::client;
use crate::report::Report;
use crate::scenario::Scenario;
use crate::server::Server;
use crate::setup;

const RETURN_DOMAIN: &str = "bounces.bench.test";
/// Emails sent (and then bounced) for the reports part.
const REPORTS: usize = 3_000;
/// SMTP connections delivering reports at once, and reports per connection (then a new
/// one, as an MTA does).
const REPORT_CONNECTIONS: usize = 8;
const PER_CONNECTION: usize = 100;

fn send_load(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    connections: usize,
    seconds: u64,
) -> Report {
    let load = rt.block_on(client::run(
        server.addr(),
        Scenario::Send.prepare(server),
        connections,
        Duration::from_secs(1),
        Duration::from_secs(seconds),
    ));
    let r = Report::new("POST /v1/send", load, server.peak_rss_kib());
    assert_eq!(r.errors, 0, "feedback: /v1/send answered errors");
    r
}

fn dsn(to: &str, n: usize) -> String {
    format!(
        "From: MAILER-DAEMON@mx.bench.test\r\nTo: {to}\r\nSubject: Undelivered\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status; boundary=\"R\"\r\n\r\n\
         --R\r\nContent-Type: text/plain\r\n\r\nCould not deliver ({n}).\r\n\
         --R\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.bench.test\r\n\r\n\
         Final-Recipient: rfc822; user{n}@example.com\r\nAction: failed\r\nStatus: 5.1.1\r\n\
         Diagnostic-Code: smtp; 550 5.1.1 no such user\r\n\r\n--R--\r\n.\r\n"
    )
}

/// Sends the reports, `PER_CONNECTION` to a connection; how many got 250.
async fn deliver(addr: String, tokens: Vec<String>) -> usize {
    let mut ok = 0;
    for chunk in tokens.chunks(PER_CONNECTION) {
        ok += session(&addr, chunk).await;
    }
    ok
}

async fn session(addr: &str, tokens: &[String]) -> usize {
    let stream = TcpStream::connect(addr).await.expect("the feedback server");
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    async fn code(lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>) -> u16 {
        loop {
            let line = lines.next_line().await.ok().flatten().unwrap_or_default();
            if line.len() < 4 || line.as_bytes()[3] != b'-' {
                return line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
            }
        }
    }
    assert_eq!(code(&mut lines).await, 220);
    write.write_all(b"EHLO bench\r\n").await.expect("EHLO");
    assert_eq!(code(&mut lines).await, 250);
    let mut ok = 0;
    for (n, to) in tokens.iter().enumerate() {
        write.write_all(b"MAIL FROM:<>\r\n").await.expect("MAIL");
        let mail = code(&mut lines).await;
        write
            .write_all(format!("RCPT TO:<{to}>\r\n").as_bytes())
            .await
            .expect("RCPT");
        let rcpt = code(&mut lines).await;
        write.write_all(b"DATA\r\n").await.expect("DATA");
        let data = code(&mut lines).await;
        if (mail, rcpt, data) != (250, 250, 354) {
            continue;
        }
        write
            .write_all(dsn(to, n).as_bytes())
            .await
            .expect("the report");
        if code(&mut lines).await == 250 {
            ok += 1;
        }
    }
    let _ = write.write_all(b"QUIT\r\n").await;
    ok
}

pub fn run(
    rt: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    dns: &TestDns,
    smtp_connections: usize,
    connections: usize,
    seconds: u64,
) {
    // Each server its own sink, both keeping what they get (the one with a return path
    // must: the envelope senders are the reports' addresses), so the two sides cost the
    // load client alike; two rounds, alternating.
    let plain_sink = SmtpServer::start();
    let plain = Server::start(bin, &setup::env(dns, &plain_sink, 0, smtp_connections));
    setup::verify_domain(rt, &plain, dns);
    let sink = SmtpServer::start();
    let mut env = setup::env(dns, &sink, 0, smtp_connections);
    env.push((
        "MAILROOM__FEEDBACK__RETURN_PATH_DOMAIN".into(),
        RETURN_DOMAIN.into(),
    ));
    env.push((
        "MAILROOM__FEEDBACK__SMTP_LISTEN".into(),
        "127.0.0.1:0".into(),
    ));
    let with = Server::start(bin, &env);
    setup::verify_domain(rt, &with, dns);
    let (mut offs, mut ons) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let off = send_load(rt, &plain, connections, seconds);
        print!("return path off:  ");
        off.print();
        offs.push(off.per_second);
        let on = send_load(rt, &with, connections, seconds);
        print!("return path on:   ");
        on.print();
        ons.push(on.per_second);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "feedback: /v1/send with a return path per email = {:.1}% of without (means of two alternating runs: {:.0} and {:.0} req/s)",
        100.0 * mean(&ons) / mean(&offs).max(1.0),
        mean(&ons),
        mean(&offs)
    );
    drop(plain);
    // Reports, on a quiet server: the sends' outbox drained first (its outcomes share
    // the project's actor with the reports), then one report per email the sink got.
    let mut last = (sink.count(), Instant::now());
    while last.1.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(200));
        if sink.count() != last.0 {
            last = (sink.count(), Instant::now());
        }
    }
    let got = sink.wait_for(REPORTS, Duration::from_secs(120));
    let tokens: Vec<String> = got
        .iter()
        .map(|m| m.mail_from.clone())
        .filter(|f| f.ends_with(RETURN_DOMAIN))
        .take(REPORTS)
        .collect();
    assert!(
        tokens.len() >= REPORTS.min(got.len()),
        "every email had a return path"
    );
    let addr = with
        .printed
        .iter()
        .find_map(|l| l.strip_prefix("feedback SMTP listening on "))
        .expect("the server printed its feedback address")
        .to_owned();
    let started = Instant::now();
    let per = tokens.len().div_ceil(REPORT_CONNECTIONS).max(1);
    let accepted: usize = rt.block_on(async {
        let tasks: Vec<_> = tokens
            .chunks(per)
            .map(|c| tokio::spawn(deliver(addr.clone(), c.to_vec())))
            .collect();
        let mut n = 0;
        for t in tasks {
            n += t.await.expect("a report connection");
        }
        n
    });
    let took = started.elapsed().as_secs_f64();
    assert_eq!(
        accepted,
        tokens.len(),
        "feedback: a report was not accepted"
    );
    println!(
        "feedback: {accepted} delivery reports over {REPORT_CONNECTIONS} SMTP connections in {took:.1} s = {:.0} reports/s (each applied durably before its 250)",
        accepted as f64 / took.max(0.001)
    );
}
