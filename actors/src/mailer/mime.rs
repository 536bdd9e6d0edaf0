//! Building the MIME message, DKIM-signed with relaxed/relaxed canonicalization (API.md
//! 14.18: lettre's default simple header canonicalization breaks verifiers).

use lettre::message::dkim::{
    DkimCanonicalization, DkimCanonicalizationType, DkimConfig, DkimSigningAlgorithm,
    DkimSigningKey,
};
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::{Address, Message};

use super::DkimParams;
use crate::model::{self, OutboundEmail};

fn mailbox(m: &model::Mailbox) -> Result<Mailbox, String> {
    let addr: Address = m
        .email
        .parse()
        .map_err(|e| format!("bad address {}: {e}", m.email))?;
    Ok(Mailbox::new(m.name.clone(), addr))
}

/// Headers that callers may not set through `headers`: they are ours to write.
const RESERVED: &[&str] = &[
    "from",
    "to",
    "cc",
    "bcc",
    "subject",
    "reply-to",
    "message-id",
    "date",
    "content-type",
    "content-transfer-encoding",
    "mime-version",
    "dkim-signature",
];

pub fn is_reserved_header(name: &str) -> bool {
    RESERVED.contains(&name.to_ascii_lowercase().as_str())
}

/// The message, and its envelope sender and recipient.
pub fn build(email: &OutboundEmail, dkim: Option<&DkimParams>) -> Result<Message, String> {
    let from = mailbox(&email.from)?;
    let domain = from.email.domain().to_owned();
    let mut b = Message::builder()
        .from(from)
        .to(mailbox(&email.to)?)
        .subject(email.subject.clone())
        .message_id(Some(format!("<{}@{}>", email.id, domain)));
    if let Some(r) = &email.reply_to {
        b = b.reply_to(mailbox(&model::Mailbox {
            name: None,
            email: r.clone(),
        })?);
    }
    for (name, value) in &email.headers {
        let name =
            HeaderName::new_from_ascii(name.clone()).map_err(|e| format!("header {name}: {e}"))?;
        b = b.raw_header(HeaderValue::new(name, value.clone()));
    }
    let html = SinglePart::html(email.html.clone());
    let mut message = if email.attachments.is_empty() {
        b.singlepart(html)
    } else {
        let mut mp = MultiPart::mixed().singlepart(html);
        for a in &email.attachments {
            let ct = ContentType::parse(&a.content_type).unwrap_or(
                ContentType::parse("application/octet-stream").map_err(|e| e.to_string())?,
            );
            mp = mp.singlepart(Attachment::new(a.filename.clone()).body(a.data.clone(), ct));
        }
        b.multipart(mp)
    }
    .map_err(|e| format!("building the message: {e}"))?;
    if let Some(d) = dkim {
        let key = DkimSigningKey::new(&d.private_key_pem, DkimSigningAlgorithm::Rsa)
            .map_err(|e| format!("DKIM key: {e}"))?;
        let headers = ["From", "Subject", "To", "Date", "Message-ID", "Reply-To"]
            .iter()
            .filter_map(|h| HeaderName::new_from_ascii((*h).to_owned()).ok())
            .collect();
        let config = DkimConfig::new(
            d.selector.clone(),
            d.domain.clone(),
            key,
            headers,
            DkimCanonicalization {
                header: DkimCanonicalizationType::Relaxed,
                body: DkimCanonicalizationType::Relaxed,
            },
        );
        message.sign(&config);
    }
    Ok(message)
}
