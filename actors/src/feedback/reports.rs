//! Reports mailed to a return path, read: the MIME structure with `mail-parser`, then
//! the report's own fields (RFC 3464 `message/delivery-status`, RFC 5965
//! `message/feedback-report`: blocks of `Name: value` lines, folded as headers are).
//!
//! What it makes of a message:
//! - a delivery report: a `Report` per recipient that `failed` (5.x.x hard, 4.x.x soft)
//!   or was `delayed` (soft); `delivered`, `relayed` and `expanded` give none;
//! - a feedback report: one complaint (`not-spam` gives none);
//! - anything else (an auto-reply, a person's answer): `Other`, counted and dropped;
//! - a report that does not read (no status part, too many recipients, bad fields):
//!   `Unreadable`, kept in quarantine rather than guessed at.
//!
//! The report's recipient is not trusted: the caller applies it to the email the
//! return-path token names, and so to that email's recipient and project.

use mail_parser::MimeHeaders;
use sha2::{Digest, Sha256};

use super::{Kind, Report};

/// Recipient blocks one delivery report may hold; more is not a bounce of one email.
pub const MAX_RECIPIENTS: usize = 50;
/// Characters of a diagnostic kept.
const MAX_TEXT: usize = 500;

#[derive(Debug)]
pub enum Read {
    Reports(Vec<Report>),
    /// Not a report (an auto-reply): nothing to apply.
    Other,
    /// A report that could not be read, and why.
    Unreadable(String),
}

/// Reads a message mailed to a return path.
pub fn read(message: &[u8]) -> Read {
    let Some(parsed) = mail_parser::MessageParser::default().parse(message) else {
        return Read::Unreadable("the message does not parse".into());
    };
    let report_type = parsed
        .content_type()
        .filter(|ct| {
            ct.ctype().eq_ignore_ascii_case("multipart")
                && ct
                    .subtype()
                    .is_some_and(|s| s.eq_ignore_ascii_case("report"))
        })
        .and_then(|ct| ct.attribute("report-type").map(str::to_ascii_lowercase));
    let Some(report_type) = report_type else {
        return Read::Other;
    };
    let wanted = match report_type.as_str() {
        "delivery-status" => ["delivery-status", "global-delivery-status"],
        "feedback-report" => ["feedback-report", "feedback-report"],
        // Another kind of report (a DMARC aggregate, a disposition): not ours to read.
        _ => return Read::Other,
    };
    let part = parsed.parts.iter().find(|p| {
        p.content_type().is_some_and(|ct| {
            ct.ctype().eq_ignore_ascii_case("message")
                && ct
                    .subtype()
                    .is_some_and(|s| wanted.iter().any(|w| s.eq_ignore_ascii_case(w)))
        })
    });
    let Some(part) = part else {
        return Read::Unreadable(format!(
            "a {report_type} report without its {} part",
            wanted[0]
        ));
    };
    let body: &[u8] = match &part.body {
        mail_parser::PartType::Text(t) | mail_parser::PartType::Html(t) => t.as_bytes(),
        mail_parser::PartType::Binary(b) | mail_parser::PartType::InlineBinary(b) => b,
        _ => return Read::Unreadable("the report part is not text".into()),
    };
    let digest: [u8; 32] = Sha256::digest(body).into();
    let id = digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    let blocks = match fields(body) {
        Ok(b) => b,
        Err(e) => return Read::Unreadable(e),
    };
    if report_type == "feedback-report" {
        return feedback(&blocks, id);
    }
    delivery(&blocks, id)
}

type Block = Vec<(String, String)>;

fn get<'a>(block: &'a Block, name: &str) -> Option<&'a str> {
    block
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Printable text only (no control characters, so nothing a header or a log line would
/// misread), at most `MAX_TEXT` characters.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_TEXT)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// The blocks of `Name: value` fields, split at blank lines, folded lines joined.
fn fields(body: &[u8]) -> Result<Vec<Block>, String> {
    let text = String::from_utf8_lossy(body);
    let mut blocks = vec![Block::new()];
    for line in text.lines() {
        if line.trim().is_empty() {
            if !blocks.last().is_some_and(Vec::is_empty) {
                blocks.push(Block::new());
            }
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let Some((_, value)) = blocks.last_mut().and_then(|b| b.last_mut()) else {
                return Err("a continuation line before any field".into());
            };
            value.push(' ');
            value.push_str(line.trim());
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("a line that is not a field: {:?}", clean(line)));
        };
        if blocks.len() > MAX_RECIPIENTS + 1 {
            return Err(format!(
                "more than {MAX_RECIPIENTS} recipients in one report"
            ));
        }
        if let Some(block) = blocks.last_mut() {
            block.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    blocks.retain(|b| !b.is_empty());
    Ok(blocks)
}

/// `rfc822; ada@example.com` -> `ada@example.com`.
fn typed_value(v: &str) -> &str {
    v.split_once(';').map_or(v, |(_, rest)| rest).trim()
}

fn delivery(blocks: &[Block], id: String) -> Read {
    // The first block is about the message; each later one about a recipient.
    let recipients: Vec<&Block> = blocks
        .iter()
        .filter(|b| get(b, "final-recipient").is_some() || get(b, "action").is_some())
        .collect();
    if recipients.is_empty() {
        return Read::Unreadable("a delivery report with no recipient block".into());
    }
    let mut out = Vec::new();
    for (i, b) in recipients.iter().enumerate() {
        let action = get(b, "action").unwrap_or_default().to_ascii_lowercase();
        let status =
            get(b, "status").map(|s| clean(s.split_whitespace().next().unwrap_or_default()));
        if status.as_deref().is_some_and(|s| !valid_status(s)) {
            return Read::Unreadable(format!("a Status that is not a status code: {status:?}"));
        }
        let kind = match action.as_str() {
            "failed" => match status.as_deref().and_then(|s| s.chars().next()) {
                Some('5') => Kind::Hard,
                Some('4') => Kind::Soft,
                _ => return Read::Unreadable("a failed recipient without a status".into()),
            },
            "delayed" => Kind::Soft,
            "delivered" | "relayed" | "expanded" => continue,
            other => return Read::Unreadable(format!("an unknown Action {:?}", clean(other))),
        };
        out.push(Report {
            kind,
            source: "smtp",
            id: format!("{id}:{i}"),
            message_id: None,
            recipient: get(b, "final-recipient").map(|r| clean(typed_value(r))),
            status,
            diagnostic: get(b, "diagnostic-code").map(|d| clean(typed_value(d))),
            feedback_type: None,
        });
    }
    Read::Reports(out)
}

/// `x.y.z`, each a number (RFC 3463).
fn valid_status(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 3
        && matches!(parts[0], "2" | "4" | "5")
        && parts[1..]
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
}

fn feedback(blocks: &[Block], id: String) -> Read {
    let Some(b) = blocks.first() else {
        return Read::Unreadable("an empty feedback report".into());
    };
    let Some(kind) = get(b, "feedback-type") else {
        return Read::Unreadable("a feedback report without Feedback-Type".into());
    };
    let kind = clean(kind).to_ascii_lowercase();
    if kind == "not-spam" {
        return Read::Reports(Vec::new());
    }
    Read::Reports(vec![Report {
        kind: Kind::Complaint,
        source: "smtp",
        id,
        message_id: None,
        recipient: get(b, "original-rcpt-to").map(|r| clean(typed_value(r))),
        status: None,
        diagnostic: None,
        feedback_type: Some(kind),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsn(status_part: &str) -> Vec<u8> {
        format!(
            "From: MAILER-DAEMON@mx.example.com\r\nTo: b-x@bounces.acme.test\r\nSubject: Undelivered\r\n\
             MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"B\"\r\n\r\n\
             --B\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n\
             --B\r\nContent-Type: message/delivery-status\r\n\r\n{status_part}\r\n\
             --B--\r\n"
        )
        .into_bytes()
    }

    #[test]
    fn a_failed_recipient_with_a_five_status_is_a_hard_bounce_and_a_delayed_one_soft() {
        let hard = dsn("Reporting-MTA: dns; mx.example.com\r\n\r\nFinal-Recipient: rfc822; ada@example.com\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 No such user\r\n");
        let Read::Reports(r) = read(&hard) else {
            panic!("a report")
        };
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].kind, r[0].status.as_deref()),
            (Kind::Hard, Some("5.1.1"))
        );
        assert_eq!(r[0].recipient.as_deref(), Some("ada@example.com"));
        assert_eq!(r[0].diagnostic.as_deref(), Some("550 5.1.1 No such user"));
        let soft = dsn("Reporting-MTA: dns; mx\r\n\r\nFinal-Recipient: rfc822; ada@example.com\r\nAction: delayed\r\nStatus: 4.4.7\r\n");
        let Read::Reports(r) = read(&soft) else {
            panic!("a report")
        };
        assert_eq!(r[0].kind, Kind::Soft);
        let ok = dsn("Reporting-MTA: dns; mx\r\n\r\nFinal-Recipient: rfc822; ada@example.com\r\nAction: delivered\r\nStatus: 2.0.0\r\n");
        assert!(matches!(read(&ok), Read::Reports(r) if r.is_empty()));
    }

    #[test]
    fn what_is_not_a_report_is_other_and_a_broken_report_is_unreadable() {
        let reply = b"From: ada@example.com\r\nSubject: Out of office\r\n\r\nI am away.\r\n";
        assert!(matches!(read(reply), Read::Other));
        let bad_status = dsn("Final-Recipient: rfc822; a@b.c\r\nAction: failed\r\nStatus: 5.1.1\r\nX-Injected: yes\r\nStatus: five\r\n");
        // The first Status counts; a garbage one alone is unreadable.
        assert!(matches!(read(&bad_status), Read::Reports(_)));
        let garbage =
            dsn("Final-Recipient: rfc822; a@b.c\r\nAction: failed\r\nStatus: 5.1.1.1\r\n");
        assert!(matches!(read(&garbage), Read::Unreadable(_)));
        let no_part = b"Content-Type: multipart/report; report-type=delivery-status; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nhi\r\n--B--\r\n";
        assert!(matches!(read(no_part), Read::Unreadable(_)));
        let many: String = (0..MAX_RECIPIENTS + 5)
            .map(|i| {
                format!(
                    "Final-Recipient: rfc822; r{i}@b.c\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n"
                )
            })
            .collect();
        assert!(matches!(read(&dsn(&many)), Read::Unreadable(e) if e.contains("recipients")));
    }

    #[test]
    fn a_header_injected_in_final_recipient_comes_out_as_plain_text() {
        let injected = dsn("Final-Recipient: rfc822; a@b.c\u{0}\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550\u{7} bad\r\n");
        let Read::Reports(r) = read(&injected) else {
            panic!("a report")
        };
        assert!(r[0]
            .recipient
            .as_deref()
            .is_some_and(|s| !s.chars().any(char::is_control)));
        assert!(r[0]
            .diagnostic
            .as_deref()
            .is_some_and(|s| !s.chars().any(char::is_control)));
    }

    #[test]
    fn an_arf_abuse_report_is_a_complaint_and_not_spam_is_nothing() {
        let arf = |kind: &str| {
            format!(
                "From: fbl@isp.example\r\nTo: b-x@bounces.acme.test\r\nMIME-Version: 1.0\r\n\
                 Content-Type: multipart/report; report-type=feedback-report; boundary=\"F\"\r\n\r\n\
                 --F\r\nContent-Type: text/plain\r\n\r\nA complaint.\r\n\
                 --F\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: {kind}\r\nUser-Agent: FBL/1.0\r\nVersion: 1\r\nOriginal-Rcpt-To: ada@example.com\r\n\r\n\
                 --F\r\nContent-Type: message/rfc822\r\n\r\nSubject: Spring\r\n\r\nHi\r\n--F--\r\n"
            )
            .into_bytes()
        };
        let Read::Reports(r) = read(&arf("abuse")) else {
            panic!("a report")
        };
        assert_eq!(
            (r[0].kind, r[0].feedback_type.as_deref()),
            (Kind::Complaint, Some("abuse"))
        );
        assert!(matches!(read(&arf("not-spam")), Read::Reports(r) if r.is_empty()));
    }

    #[test]
    fn nested_multiparts_and_random_bytes_never_panic() {
        let mut deep = String::new();
        for i in 0..200 {
            deep.push_str(&format!(
                "Content-Type: multipart/mixed; boundary=\"b{i}\"\r\n\r\n--b{i}\r\n"
            ));
        }
        let _ = read(deep.as_bytes());
        for seed in 0..200u32 {
            let bytes: Vec<u8> = (0..512u32)
                .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8)
                .collect();
            let _ = read(&bytes);
        }
    }
}
