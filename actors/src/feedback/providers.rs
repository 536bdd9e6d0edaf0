//! Provider callbacks, read: each provider's documented payload turned into `Report`s,
//! and the signatures that prove a payload is the provider's.
//!
//! - Postmark: a bounce or spam-complaint webhook (`RecordType`, `Type`, `Email`,
//!   `MessageID`), behind HTTP basic auth the edge checks.
//! - SendGrid: the Event Webhook, an array of events (`bounce`, `dropped`, `deferred`,
//!   `spamreport`), signed with ECDSA P-256 over the timestamp header and the body.
//! - Mailgun: a webhook with `signature {timestamp, token, signature}` (hex
//!   HMAC-SHA256 of timestamp + token) and `event-data` (`failed` with a `severity`,
//!   `complained`).
//!
//! A payload that does not parse is an error for the caller to answer 400; events that
//! are not bounces or complaints (a delivery, an open, an auto-reply) give no report.

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::{kind_of_status, Kind, Report};

/// Why a callback is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallbackError {
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the payload is not what this provider sends: {0}")]
    BadPayload(String),
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn bad(m: &str) -> CallbackError {
    CallbackError::BadPayload(m.to_owned())
}

/// Postmark's bounce and spam-complaint webhooks.
pub fn postmark(body: &[u8]) -> Result<Vec<Report>, CallbackError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    if !v.is_object() {
        return Err(bad("expected a JSON object"));
    }
    let record = text(&v, "RecordType").unwrap_or_default();
    let kind = match (
        record.as_str(),
        text(&v, "Type").unwrap_or_default().as_str(),
    ) {
        ("SpamComplaint", _) | (_, "SpamComplaint") => Kind::Complaint,
        ("Bounce", "HardBounce" | "BadEmailAddress" | "ManuallyDeactivated" | "Blocked") => {
            Kind::Hard
        }
        ("Bounce", "SoftBounce" | "Transient" | "DnsError" | "MailFrontier") => Kind::Soft,
        // Auto-replies, subscriptions, deliveries, opens: nothing to apply.
        _ => return Ok(Vec::new()),
    };
    let id = text(&v, "ID").ok_or_else(|| bad("ID is missing"))?;
    Ok(vec![Report {
        kind,
        source: "postmark",
        id,
        message_id: text(&v, "MessageID"),
        recipient: text(&v, "Email"),
        status: None,
        diagnostic: text(&v, "Details").or_else(|| text(&v, "Description")),
        feedback_type: (kind == Kind::Complaint).then(|| "abuse".to_owned()),
    }])
}

/// Whether `signature` (hex) is the HMAC-SHA256 of `timestamp` + `token` under `key`,
/// compared in constant time.
pub(crate) fn mailgun_signed(key: &str, timestamp: &str, token: &str, signature: &str) -> bool {
    let Ok(expected) = hex_bytes(signature) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else {
        return false;
    };
    mac.update(timestamp.as_bytes());
    mac.update(token.as_bytes());
    mac.verify_slice(&expected).is_ok()
}

fn hex_bytes(s: &str) -> Result<Vec<u8>, ()> {
    if !s.len().is_multiple_of(2) || s.len() > 256 {
        return Err(());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2).ok_or(())?, 16).map_err(|_| ()))
        .collect()
}

/// A Mailgun webhook: its signature checked with `signing_key`, and its event read.
/// `now_secs` refuses a signature older than `max_age_secs` (a replay).
pub fn mailgun(
    body: &[u8],
    signing_key: &str,
    now_secs: i64,
    max_age_secs: i64,
) -> Result<Vec<Report>, CallbackError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let sig = v.get("signature").ok_or(CallbackError::BadSignature)?;
    let (Some(ts), Some(token), Some(signature)) = (
        text(sig, "timestamp"),
        text(sig, "token"),
        text(sig, "signature"),
    ) else {
        return Err(CallbackError::BadSignature);
    };
    if !mailgun_signed(signing_key, &ts, &token, &signature) {
        return Err(CallbackError::BadSignature);
    }
    let at: i64 = ts.parse().map_err(|_| CallbackError::BadSignature)?;
    if now_secs.abs_diff(at) > max_age_secs.unsigned_abs() {
        return Err(CallbackError::BadSignature);
    }
    let data = v
        .get("event-data")
        .ok_or_else(|| bad("event-data is missing"))?;
    let status = data.get("delivery-status").cloned().unwrap_or(Value::Null);
    let kind = match text(data, "event").as_deref() {
        Some("complained") => Kind::Complaint,
        Some("failed") => match text(data, "severity").as_deref() {
            Some("permanent") => Kind::Hard,
            Some("temporary") => Kind::Soft,
            _ => kind_of_status(
                text(&status, "enhanced-code").as_deref(),
                status.get("code").and_then(Value::as_u64).map(|c| c as u16),
                Kind::Soft,
            ),
        },
        _ => return Ok(Vec::new()),
    };
    let id = text(data, "id").unwrap_or(token);
    let message_id = data
        .get("message")
        .and_then(|m| m.get("headers"))
        .and_then(|h| text(h, "message-id"));
    Ok(vec![Report {
        kind,
        source: "mailgun",
        id,
        message_id,
        recipient: text(data, "recipient"),
        status: text(&status, "enhanced-code"),
        diagnostic: text(&status, "description").or_else(|| text(&status, "message")),
        feedback_type: (kind == Kind::Complaint).then(|| "abuse".to_owned()),
    }])
}

/// The DER header of a P-256 public key (SubjectPublicKeyInfo: id-ecPublicKey,
/// prime256v1, a 66-byte bit string); the uncompressed point follows it.
const P256_SPKI_HEADER: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The point of a SendGrid verification key (base64 of its DER SubjectPublicKeyInfo, as
/// the SendGrid console shows it); None when it is not a P-256 key.
pub fn sendgrid_key(base64_der: &str) -> Option<Vec<u8>> {
    let der = base64::engine::general_purpose::STANDARD
        .decode(base64_der.trim())
        .ok()?;
    let point = der.strip_prefix(&P256_SPKI_HEADER[..])?;
    (point.len() == 65 && point[0] == 0x04).then(|| point.to_vec())
}

/// Whether `signature` (base64 DER) signs `timestamp` + `body` under the key's `point`.
pub fn sendgrid_signed(point: &[u8], timestamp: &str, body: &[u8], signature: &str) -> bool {
    use aws_lc_rs::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_ASN1};
    let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
        return false;
    };
    let mut signed = Vec::with_capacity(timestamp.len() + body.len());
    signed.extend_from_slice(timestamp.as_bytes());
    signed.extend_from_slice(body);
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, point)
        .verify(&signed, &sig)
        .is_ok()
}

/// SendGrid's Event Webhook (its signature checked by the caller with
/// `sendgrid_signed`): `bounce` (hard, or soft when its `type` is `blocked` or its
/// status is 4.x.x), `dropped` for a bounced address, `deferred` (soft), `spamreport`.
pub fn sendgrid(body: &[u8]) -> Result<Vec<Report>, CallbackError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let events = v
        .as_array()
        .ok_or_else(|| bad("expected an array of events"))?;
    let mut out = Vec::new();
    for e in events {
        let status = text(e, "status");
        let kind = match text(e, "event").as_deref() {
            Some("spamreport") => Kind::Complaint,
            Some("bounce") if text(e, "type").as_deref() == Some("blocked") => Kind::Soft,
            Some("bounce") => kind_of_status(status.as_deref(), None, Kind::Hard),
            Some("dropped") if text(e, "reason").is_some_and(|r| r.contains("Bounced Address")) => {
                Kind::Hard
            }
            Some("deferred") => Kind::Soft,
            _ => continue,
        };
        let Some(id) = text(e, "sg_event_id") else {
            continue;
        };
        out.push(Report {
            kind,
            source: "sendgrid",
            id,
            message_id: text(e, "smtp-id"),
            recipient: text(e, "email"),
            status,
            diagnostic: text(e, "reason").or_else(|| text(e, "response")),
            feedback_type: (kind == Kind::Complaint).then(|| "abuse".to_owned()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Mailgun's documented example: key, timestamp, token and the signature they make.
    #[test]
    fn a_mailgun_signature_verifies_under_its_key_and_not_another() {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key-1").unwrap();
        mac.update(b"1529006854a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0";
        assert!(mailgun_signed("key-1", "1529006854", token, &hex));
        assert!(!mailgun_signed("key-2", "1529006854", token, &hex));
        assert!(!mailgun_signed("key-1", "1529006855", token, &hex));
        assert!(!mailgun_signed("key-1", "1529006854", token, "zz"));
    }

    #[test]
    fn a_postmark_auto_reply_gives_no_report_and_a_hard_bounce_one() {
        let auto = br#"{"RecordType":"Bounce","ID":1,"Type":"AutoResponder","Email":"a@b.co"}"#;
        assert!(postmark(auto).unwrap().is_empty());
        let hard = br#"{"RecordType":"Bounce","ID":42,"Type":"HardBounce","Email":"a@b.co","Details":"550 5.1.1 no such user"}"#;
        let r = postmark(hard).unwrap();
        assert_eq!((r[0].kind, r[0].id.as_str()), (Kind::Hard, "42"));
        assert!(postmark(b"[1,2]").is_err());
        assert!(postmark(b"{not json").is_err());
    }

    #[test]
    fn a_sendgrid_key_that_is_not_p256_is_refused() {
        assert!(sendgrid_key("AAAA").is_none());
        assert!(sendgrid_key("not base64!").is_none());
    }
}
