//! Amazon SES bounce and complaint notifications, as Amazon SNS delivers them over HTTP
//! (`POST /feedback/ses`): an SNS message (`Notification`, `SubscriptionConfirmation`,
//! `UnsubscribeConfirmation`) signed with RSA by a certificate SNS serves over HTTPS,
//! whose `Message` is SES's notification (`notificationType`, or `eventType` when a
//! configuration set publishes events).
//!
//! What makes a message trusted, as AWS documents it: the certificate URL is HTTPS on a
//! host the operator allows (`sns.<region>.amazonaws.com` by default), the certificate
//! is in its validity period, and its key verifies the signature over the fields SNS
//! signs (SHA-1 for `SignatureVersion` 1, SHA-256 for 2). The topic must be one the
//! operator lists. Fetching the certificate is the edge's work (it has the client);
//! this module reads and checks.

use base64::Engine;
use serde_json::Value;

use super::providers::CallbackError;
use super::{kind_of_status, Kind, Report};

/// What an SNS message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnsType {
    Notification,
    SubscriptionConfirmation,
    UnsubscribeConfirmation,
}

/// An SNS message's fields, as SNS posts them (JSON with `Content-Type: text/plain`).
#[derive(Debug, Clone)]
pub struct SnsMessage {
    pub kind: SnsType,
    pub message_id: String,
    pub topic_arn: String,
    pub message: String,
    pub subject: Option<String>,
    pub timestamp: String,
    pub token: Option<String>,
    pub subscribe_url: Option<String>,
    pub signature_version: String,
    pub signature: String,
    pub signing_cert_url: String,
}

fn bad(m: impl Into<String>) -> CallbackError {
    CallbackError::BadPayload(m.into())
}

fn field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Reads an SNS message; a missing field that SNS always sends is a bad payload.
pub fn parse(body: &[u8]) -> Result<SnsMessage, CallbackError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    if !v.is_object() {
        return Err(bad("expected an SNS message (a JSON object)"));
    }
    let need = |key: &str| field(&v, key).ok_or_else(|| bad(format!("{key} is missing")));
    let kind = match need("Type")?.as_str() {
        "Notification" => SnsType::Notification,
        "SubscriptionConfirmation" => SnsType::SubscriptionConfirmation,
        "UnsubscribeConfirmation" => SnsType::UnsubscribeConfirmation,
        other => return Err(bad(format!("Type {other:?} is not an SNS message type"))),
    };
    let m = SnsMessage {
        kind,
        message_id: need("MessageId")?,
        topic_arn: need("TopicArn")?,
        message: need("Message")?,
        subject: field(&v, "Subject"),
        timestamp: need("Timestamp")?,
        token: field(&v, "Token"),
        subscribe_url: field(&v, "SubscribeURL"),
        signature_version: need("SignatureVersion")?,
        signature: need("Signature")?,
        signing_cert_url: need("SigningCertURL")?,
    };
    if kind != SnsType::Notification && (m.token.is_none() || m.subscribe_url.is_none()) {
        return Err(bad("a subscription message needs Token and SubscribeURL"));
    }
    Ok(m)
}

/// The text SNS signs: `name\nvalue\n` for each signed field in this order.
pub fn string_to_sign(m: &SnsMessage) -> String {
    let mut out = String::new();
    let mut add = |k: &str, v: &str| {
        out.push_str(k);
        out.push('\n');
        out.push_str(v);
        out.push('\n');
    };
    let kind = match m.kind {
        SnsType::Notification => "Notification",
        SnsType::SubscriptionConfirmation => "SubscriptionConfirmation",
        SnsType::UnsubscribeConfirmation => "UnsubscribeConfirmation",
    };
    add("Message", &m.message);
    add("MessageId", &m.message_id);
    if m.kind == SnsType::Notification {
        if let Some(s) = &m.subject {
            add("Subject", s);
        }
    } else {
        add(
            "SubscribeURL",
            m.subscribe_url.as_deref().unwrap_or_default(),
        );
    }
    add("Timestamp", &m.timestamp);
    if m.kind != SnsType::Notification {
        add("Token", m.token.as_deref().unwrap_or_default());
    }
    add("TopicArn", &m.topic_arn);
    add("Type", kind);
    out
}

/// Whether `url` is HTTPS on a host that `hosts` allows (each a host name where `*`
/// stands for one label, as in `sns.*.amazonaws.com`; a port other than 443 only when
/// the entry names it, as in `127.0.0.1:8443`), without a user or anything else that
/// could point elsewhere.
pub fn url_allowed(url: &str, hosts: &[String]) -> bool {
    let Some(rest) = url.strip_prefix("https://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((host, port)) = host_and_port(authority) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    hosts.iter().any(|entry| {
        host_and_port(entry.trim())
            .is_some_and(|(pattern, p)| p == port && host_matches(&host, pattern))
    })
}

/// `host[:port]` (443 when none is given); None for anything else (a user, a bracket, a
/// port that is not a number).
fn host_and_port(authority: &str) -> Option<(&str, u16)> {
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, p.parse().ok()?),
        None => (authority, 443),
    };
    (!host.is_empty() && !host.contains(['@', '\\', '%', '[', ']'])).then_some((host, port))
}

fn host_matches(host: &str, pattern: &str) -> bool {
    let (h, p): (Vec<&str>, Vec<&str>) = (host.split('.').collect(), pattern.split('.').collect());
    h.len() == p.len()
        && h.iter().zip(&p).all(|(h, p)| {
            !h.is_empty()
                && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && (if *p == "*" {
                    region_like(h)
                } else {
                    p.eq_ignore_ascii_case(h)
                })
        })
}

/// An AWS region's name (`us-east-1`, `us-gov-west-1`, `cn-north-1`): what `*` stands
/// for in a host pattern. Not any label: `sns.s3.amazonaws.com` is an S3 bucket named
/// `sns`, which anyone may own.
fn region_like(label: &str) -> bool {
    let parts: Vec<&str> = label.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[0].bytes().all(|b| b.is_ascii_lowercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts
            .last()
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `url` is where SNS keeps a signing certificate: an allowed host
/// (`url_allowed`) and exactly the path SNS uses, `/SimpleNotificationService-<hex>.pem`,
/// with no query or fragment.
pub fn cert_url_allowed(url: &str, hosts: &[String]) -> bool {
    let Some(rest) = url.strip_prefix("https://") else {
        return false;
    };
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let name = path
        .strip_prefix("/SimpleNotificationService-")
        .and_then(|n| n.strip_suffix(".pem"));
    url_allowed(url, hosts)
        && name.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// How old an SNS message may be: SNS retries an HTTP delivery for an hour at most.
pub const MAX_AGE_SECS: i64 = 2 * 3600;

/// What can be checked before a certificate is fetched: a signature version allowed
/// (`min_version`: 2 refuses SHA-1), a signature that is base64, and a timestamp within
/// `MAX_AGE_SECS` of `now_secs` (a replay of an old message is refused).
pub fn precheck(m: &SnsMessage, min_version: u8, now_secs: i64) -> Result<(), CallbackError> {
    let version_ok = match m.signature_version.as_str() {
        "1" => min_version <= 1,
        "2" => true,
        _ => false,
    };
    let sig_ok = base64::engine::general_purpose::STANDARD
        .decode(m.signature.trim())
        .is_ok_and(|s| !s.is_empty());
    let at = chrono::DateTime::parse_from_rfc3339(&m.timestamp).map(|t| t.timestamp());
    let fresh = at.is_ok_and(|t| now_secs - t <= MAX_AGE_SECS && t - now_secs <= 300);
    if version_ok && sig_ok && fresh {
        Ok(())
    } else {
        Err(CallbackError::BadSignature)
    }
}

/// Checks the message's signature with the certificate (PEM) its URL served, at
/// `now_secs` (the certificate must be valid then), issued to `subject` (its common
/// name or one of its DNS names: `sns.amazonaws.com` for SNS's own).
pub fn verify(
    m: &SnsMessage,
    cert_pem: &[u8],
    now_secs: i64,
    subject: &str,
) -> Result<(), CallbackError> {
    use aws_lc_rs::signature::{
        UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY, RSA_PKCS1_2048_8192_SHA256,
    };
    let alg = match m.signature_version.as_str() {
        "1" => &RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
        "2" => &RSA_PKCS1_2048_8192_SHA256,
        _ => return Err(CallbackError::BadSignature),
    };
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(cert_pem).map_err(|_| CallbackError::BadSignature)?;
    let cert = pem.parse_x509().map_err(|_| CallbackError::BadSignature)?;
    let named = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| cn.eq_ignore_ascii_case(subject))
        || cert.subject_alternative_name().ok().flatten().is_some_and(|san| {
            san.value.general_names.iter().any(|n| {
                matches!(n, x509_parser::extensions::GeneralName::DNSName(d) if d.eq_ignore_ascii_case(subject))
            })
        });
    if !named {
        return Err(CallbackError::BadSignature);
    }
    let validity = cert.validity();
    if now_secs < validity.not_before.timestamp() || now_secs > validity.not_after.timestamp() {
        return Err(CallbackError::BadSignature);
    }
    let sig = base64::engine::general_purpose::STANDARD
        .decode(m.signature.trim())
        .map_err(|_| CallbackError::BadSignature)?;
    // The RSAPublicKey inside the SubjectPublicKeyInfo, which is what aws-lc-rs takes.
    let key = &cert.public_key().subject_public_key.data;
    UnparsedPublicKey::new(alg, key.as_ref())
        .verify(string_to_sign(m).as_bytes(), &sig)
        .map_err(|_| CallbackError::BadSignature)
}

/// The reports in an SES notification (the SNS message's `Message`): one per bounced
/// or complaining recipient; deliveries, sends and opens give none. A `Permanent`
/// bounce is hard, `Transient` soft, `Undetermined` by its status code.
pub fn reports(message: &str) -> Result<Vec<Report>, CallbackError> {
    let v: Value = serde_json::from_str(message)
        .map_err(|e| bad(format!("the SES notification in Message: {e}")))?;
    let kind = field(&v, "notificationType")
        .or_else(|| field(&v, "eventType"))
        .unwrap_or_default();
    let mail = v.get("mail").cloned().unwrap_or(Value::Null);
    // Our own Message-ID, as SES kept it among the original headers.
    let message_id = mail
        .get("commonHeaders")
        .and_then(|h| field(h, "messageId"))
        .or_else(|| {
            mail.get("headers")?.as_array()?.iter().find_map(|h| {
                field(h, "name")
                    .filter(|n| n.eq_ignore_ascii_case("message-id"))
                    .and_then(|_| field(h, "value"))
            })
        });
    let fallback_id = field(&mail, "messageId").unwrap_or_default();
    let mut out = Vec::new();
    match kind.as_str() {
        "Bounce" => {
            let b = v.get("bounce").ok_or_else(|| bad("bounce is missing"))?;
            let id = field(b, "feedbackId").unwrap_or(fallback_id);
            let permanence = field(b, "bounceType").unwrap_or_default();
            for r in b
                .get("bouncedRecipients")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .take(super::reports::MAX_RECIPIENTS)
            {
                let status = field(r, "status");
                let kind = match permanence.as_str() {
                    "Permanent" => Kind::Hard,
                    "Transient" => Kind::Soft,
                    _ => kind_of_status(status.as_deref(), None, Kind::Soft),
                };
                let recipient = field(r, "emailAddress");
                out.push(Report {
                    kind,
                    source: "ses",
                    id: format!("{id}/{}", recipient.as_deref().unwrap_or_default()),
                    message_id: message_id.clone(),
                    recipient,
                    status,
                    diagnostic: field(r, "diagnosticCode"),
                    feedback_type: None,
                });
            }
        }
        "Complaint" => {
            let c = v
                .get("complaint")
                .ok_or_else(|| bad("complaint is missing"))?;
            let id = field(c, "feedbackId").unwrap_or(fallback_id);
            let feedback_type = field(c, "complaintFeedbackType").unwrap_or("abuse".into());
            for r in c
                .get("complainedRecipients")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .take(super::reports::MAX_RECIPIENTS)
            {
                let recipient = field(r, "emailAddress");
                out.push(Report {
                    kind: Kind::Complaint,
                    source: "ses",
                    id: format!("{id}/{}", recipient.as_deref().unwrap_or_default()),
                    message_id: message_id.clone(),
                    recipient,
                    status: None,
                    diagnostic: None,
                    feedback_type: Some(feedback_type.clone()),
                });
            }
        }
        _ => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec![
            "sns.*.amazonaws.com".into(),
            "sns.*.amazonaws.com.cn".into(),
        ]
    }

    #[test]
    fn only_https_on_an_allowed_host_may_serve_the_certificate() {
        let ok = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem";
        assert!(url_allowed(ok, &hosts()));
        assert!(url_allowed(
            "https://sns.cn-north-1.amazonaws.com.cn/x.pem",
            &hosts()
        ));
        assert!(url_allowed(
            "https://sns.us-east-1.amazonaws.com:443/x.pem",
            &hosts()
        ));
        let local = vec!["127.0.0.1:8443".to_owned()];
        assert!(url_allowed("https://127.0.0.1:8443/x.pem", &local));
        assert!(!url_allowed("https://127.0.0.1/x.pem", &local));
        assert!(!url_allowed("https://127.0.0.1:8444/x.pem", &local));
        for bad in [
            "http://sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com.evil.test/x.pem",
            "https://evil.test/sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com@evil.test/x.pem",
            "https://sns.us-east-1.amazonaws.com:8443/x.pem",
            "https://sns.a.b.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com:x/x.pem",
            "https://sns..amazonaws.com/x.pem",
            "https://sns.s3.amazonaws.com/x.pem",
            "https://sns.s3-us-west-2.amazonaws.com/x.pem",
            "https://sns.s3-accelerate.amazonaws.com/x.pem",
        ] {
            assert!(!url_allowed(bad, &hosts()), "{bad}");
        }
        let cert = "https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-01ab.pem";
        assert!(cert_url_allowed(cert, &hosts()));
        for bad in [
            "https://sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-01ab.pem?x=1",
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-.pem",
            "https://sns.us-east-1.amazonaws.com/a/SimpleNotificationService-01ab.pem",
        ] {
            assert!(!cert_url_allowed(bad, &hosts()), "{bad}");
        }
    }

    #[test]
    fn the_signed_text_follows_the_fields_sns_names_in_order() {
        let m = parse(br#"{"Type":"Notification","MessageId":"m1","TopicArn":"arn:t","Message":"hi","Timestamp":"2026-01-01T00:00:00.000Z","SignatureVersion":"2","Signature":"x","SigningCertURL":"https://s/x.pem"}"#).unwrap();
        assert_eq!(
            string_to_sign(&m),
            "Message\nhi\nMessageId\nm1\nTimestamp\n2026-01-01T00:00:00.000Z\nTopicArn\narn:t\nType\nNotification\n"
        );
    }

    #[test]
    fn a_permanent_bounce_is_hard_per_recipient_and_a_delivery_is_nothing() {
        let bounce = r#"{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","feedbackId":"f1","bouncedRecipients":[{"emailAddress":"a@b.co","status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 no such user"},{"emailAddress":"c@b.co"}]},"mail":{"messageId":"ses-1","commonHeaders":{"messageId":"<x@acme.test>"}}}"#;
        let r = reports(bounce).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].kind, r[0].id.as_str()), (Kind::Hard, "f1/a@b.co"));
        assert_eq!(r[0].message_id.as_deref(), Some("<x@acme.test>"));
        let delivery = r#"{"notificationType":"Delivery","mail":{},"delivery":{}}"#;
        assert!(reports(delivery).unwrap().is_empty());
        assert!(reports("not json").is_err());
    }

    // A vector made with OpenSSL (`openssl req -x509 -newkey rsa:2048`, then `openssl
    // dgst -sha1 -sign` over the text below): SignatureVersion 1 is SHA-1, which
    // aws-lc-rs verifies but does not sign, so the test cannot make its own.
    #[test]
    fn a_version_1_signature_verifies_with_sha1_and_not_once_changed() {
        let cert = include_bytes!("testdata/sns_v1_cert.pem");
        let mut m = parse(br#"{"Type":"Notification","MessageId":"v1-vector","TopicArn":"arn:aws:sns:us-east-1:123456789012:ses-feedback","Message":"{\"notificationType\":\"Complaint\"}","Timestamp":"2026-11-28T08:00:00.000Z","SignatureVersion":"1","Signature":"SIG","SigningCertURL":"https://sns.us-east-1.amazonaws.com/x.pem"}"#).unwrap();
        m.signature = "Pu0B1Ru8zRsiQZK/0o5/15Hw9ka0gZx5y+P8e/2tDyLr6Py7IAIXKL0fXhcWBd5tJEQgFXCmfmBhjNlBrtY4zq+IFqUceyad5JnWBqD12G1gx9Rw9asjo2gdCOaH1SET8DMLBc6QdE4EiY+tDK/eS8pg95oJohN/MVMBqow66TQ0PCMRceVT83X5r4AvCgwDMO3yXNo8KNjqMjStZqZigGplip7t9Ge9fMZ1FgIdthgGrHyKa10f7KSQyNnWReJg5WwihkUIXEpb47B1rVKLGOMMz9FWPE4LKlT2UhSDvEO8+Q2y06xXi3jOTj9bpv54QkcIVAAboQ37/ADbzjaC1w==".into();
        let now = 1_795_852_800; // 2026-11-28
        let who = "sns.us-east-1.test";
        assert_eq!(verify(&m, cert, now, who), Ok(()));
        assert_eq!(
            verify(&m, cert, now, "sns.amazonaws.com"),
            Err(CallbackError::BadSignature),
            "a certificate issued to another name"
        );
        let mut changed = m.clone();
        changed.message_id = "v1-vectoR".into();
        assert_eq!(
            verify(&changed, cert, now, who),
            Err(CallbackError::BadSignature)
        );
        let mut as_v2 = m.clone();
        as_v2.signature_version = "2".into();
        assert_eq!(
            verify(&as_v2, cert, now, who),
            Err(CallbackError::BadSignature)
        );
        // Outside the certificate's validity.
        assert_eq!(
            verify(&m, cert, 1_600_000_000, who),
            Err(CallbackError::BadSignature)
        );
    }
}
