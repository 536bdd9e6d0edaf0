//! Building the MIME message, DKIM-signed with relaxed/relaxed canonicalization (API.md
//! 14.18: lettre's default simple header canonicalization breaks verifiers).

use lettre::message::dkim::{
    DkimCanonicalization, DkimCanonicalizationType, DkimConfig, DkimSigningAlgorithm,
    DkimSigningKey,
};
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::{Address, Message};
use std::collections::HashMap;
use std::sync::Arc;

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

/// Parsed DKIM signing configurations by domain and selector. Parsing a PKCS#1 key
/// recomputes its CRT values, which cost about as much as a signature, so each mailer
/// parses a domain's key once and reuses it while the stored key stays the same.
#[derive(Default)]
pub struct Signers {
    by_domain: HashMap<(String, String), (String, Arc<DkimConfig>)>,
}

/// A bound, not a policy: a mailer that has seen this many sender keys starts over.
const SIGNERS_MAX: usize = 1_000;

impl Signers {
    pub fn get(&mut self, d: &DkimParams) -> Result<Arc<DkimConfig>, String> {
        let id = (d.domain.clone(), d.selector.clone());
        if let Some((pem, config)) = self.by_domain.get(&id) {
            if *pem == d.private_key_pem {
                return Ok(config.clone());
            }
        }
        let config = Arc::new(dkim_config(d)?);
        if self.by_domain.len() >= SIGNERS_MAX {
            self.by_domain.clear();
        }
        self.by_domain
            .insert(id, (d.private_key_pem.clone(), config.clone()));
        Ok(config)
    }
}

fn dkim_config(d: &DkimParams) -> Result<DkimConfig, String> {
    let key = DkimSigningKey::new(&d.private_key_pem, DkimSigningAlgorithm::Rsa)
        .map_err(|e| format!("DKIM key: {e}"))?;
    let headers = ["From", "Subject", "To", "Date", "Message-ID", "Reply-To"]
        .iter()
        .filter_map(|h| HeaderName::new_from_ascii((*h).to_owned()).ok())
        .collect();
    Ok(DkimConfig::new(
        d.selector.clone(),
        d.domain.clone(),
        key,
        headers,
        DkimCanonicalization {
            header: DkimCanonicalizationType::Relaxed,
            body: DkimCanonicalizationType::Relaxed,
        },
    ))
}

/// The message, and its envelope sender and recipient.
pub fn build(email: &OutboundEmail, dkim: Option<&DkimConfig>) -> Result<Message, String> {
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
    if let Some(config) = dkim {
        message.sign(config);
    }
    Ok(message)
}
