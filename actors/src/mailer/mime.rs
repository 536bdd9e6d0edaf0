//! Building the MIME message (multipart/alternative: a text/plain part, the sender's
//! own or one made from the HTML, then the HTML as a whole document; inside multipart/mixed with attachments),
//! and DKIM-signing its bytes with relaxed/relaxed
//! canonicalization (API.md 14.18: simple header canonicalization breaks verifiers).
//! Signing is mail-auth's signer over an aws-lc-rs RSA key: the signature is the largest
//! cost of a delivery, and aws-lc-rs signs ~2.4x faster than ring and ~4x faster than the
//! pure-Rust rsa crate that lettre's own dkim feature uses (figures in actors/Cargo.toml).

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use lettre::address::Envelope;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MultiPart};
use lettre::{Address, Message};
use mail_auth::common::crypto::{Algorithm, Sha256, SigningKey};
use mail_auth::common::headers::{HeaderWriter, Writable};
use mail_auth::dkim::{Canonicalization, DkimSigner, Done};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivatePkcs1KeyDer;
use std::collections::HashMap;
use std::sync::Arc;

use super::{document, plain_text, DkimParams};
use crate::model::{EmailAddress, OutboundEmail};

pub type Signer = DkimSigner<RsaSha256Key, Done>;

/// Why a message could not be built or signed: our own fault, never the recipient's.
#[derive(Debug, thiserror::Error)]
pub enum MimeError {
    #[error("the DKIM key is not a PKCS#1 PEM")]
    KeyPem(#[source] rustls_pki_types::pem::Error),
    #[error("the DKIM key is not a usable RSA key")]
    Key(#[source] aws_lc_rs::error::KeyRejected),
    #[error("DKIM signing")]
    Sign(#[source] mail_auth::Error),
    #[error("the address {0} is not one lettre accepts")]
    Address(String, #[source] lettre::address::AddressError),
    #[error("the recipient was erased with the contact")]
    Erased,
    #[error("the header name {0}")]
    Header(String, #[source] lettre::message::header::InvalidHeaderName),
    #[error("building the message")]
    Build(#[source] lettre::error::Error),
    #[error("building the message panicked: {0}")]
    Panicked(String),
}

/// An RSA key that signs rsa-sha256 DKIM signatures with aws-lc-rs.
pub struct RsaSha256Key {
    pair: RsaKeyPair,
    rng: SystemRandom,
}

impl RsaSha256Key {
    /// From a PKCS#1 PEM, as domain keys are stored.
    pub fn from_pkcs1_pem(pem: &str) -> Result<Self, MimeError> {
        let der = PrivatePkcs1KeyDer::from_pem_slice(pem.as_bytes()).map_err(MimeError::KeyPem)?;
        let pair = RsaKeyPair::from_der(der.secret_pkcs1_der()).map_err(MimeError::Key)?;
        Ok(Self {
            pair,
            rng: SystemRandom::new(),
        })
    }
}

/// Seeds aws-lc's random generator, which RSA signing uses for blinding. Its first use
/// in a process takes ~30 ms (measured); done lazily, that stalled the first email of
/// each mailer after the pacer let it go, and paced deliveries bunched (15 arrived in one
/// second at 14/s). Called once at start-up, before any email is paced.
pub fn warm_up() {
    use aws_lc_rs::rand::SecureRandom;
    let started = std::time::Instant::now();
    let mut seed = [0u8; 32];
    if let Err(e) = SystemRandom::new().fill(&mut seed) {
        tracing::warn!(error = %e, "warming up the DKIM signer's random generator failed");
    }
    tracing::debug!(
        micros = started.elapsed().as_micros() as u64,
        "DKIM signer warmed up"
    );
}

impl SigningKey for RsaSha256Key {
    type Hasher = Sha256;

    fn sign(&self, input: impl Writable) -> mail_auth::Result<Vec<u8>> {
        let mut data = Vec::with_capacity(512);
        input.write(&mut data);
        let mut signature = vec![0; self.pair.public_modulus_len()];
        self.pair
            .sign(&RSA_PKCS1_SHA256, &self.rng, &data, &mut signature)
            .map_err(|e| mail_auth::Error::CryptoError(e.to_string()))?;
        Ok(signature)
    }

    fn algorithm(&self) -> Algorithm {
        Algorithm::RsaSha256
    }
}

/// lettre's own address type, from ours (which lettre may still refuse: a quoted local
/// part, say), failing this email with the reason.
fn mailbox(name: Option<String>, email: &EmailAddress) -> Result<Mailbox, MimeError> {
    let addr: Address = email
        .as_str()
        .parse()
        .map_err(|e| MimeError::Address(email.to_string(), e))?;
    Ok(Mailbox::new(name, addr))
}

/// Headers that callers may not set through `headers`: they are ours to write, or they
/// speak for the relay or a receiver (a tenant's `Authentication-Results` or `Received`
/// would forge a verdict or a trace), or they would change how the message is parsed.
const RESERVED: &[&str] = &[
    "from",
    "to",
    "cc",
    "bcc",
    "subject",
    "reply-to",
    "sender",
    "return-path",
    "message-id",
    "date",
    "mime-version",
    "dkim-signature",
    "received",
    "received-spf",
    "authentication-results",
    "domainkey-signature",
];

/// Families of reserved headers, by prefix.
const RESERVED_PREFIXES: &[&str] = &["content-", "list-unsubscribe", "resent-", "arc-"];

pub fn is_reserved_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    RESERVED.contains(&name.as_str()) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Parsed DKIM signers by domain and selector. Parsing a PKCS#1 key checks it and
/// sets up its Montgomery contexts, which costs more than a signature, so each mailer
/// parses a domain's key once and reuses it while the stored key stays the same.
#[derive(Default)]
pub struct Signers {
    by_domain: HashMap<(String, String), (String, Arc<Signer>)>,
}

/// A bound, not a policy: a mailer that has seen this many sender keys starts over.
const SIGNERS_MAX: usize = 1_000;

impl Signers {
    pub fn get(&mut self, d: &DkimParams) -> Result<Arc<Signer>, MimeError> {
        let id = (d.domain.clone(), d.selector.clone());
        if let Some((pem, signer)) = self.by_domain.get(&id) {
            if *pem == d.private_key_pem {
                return Ok(signer.clone());
            }
        }
        let signer = Arc::new(signer(d)?);
        if self.by_domain.len() >= SIGNERS_MAX {
            self.by_domain.clear();
        }
        self.by_domain
            .insert(id, (d.private_key_pem.clone(), signer.clone()));
        Ok(signer)
    }
}

/// The headers we sign: all that we write and a reader sees (RFC 6376 5.4.1).
/// List-Unsubscribe and List-Unsubscribe-Post too: RFC 8058 (section 4) has receivers
/// honour one-click unsubscribe only when a valid DKIM signature covers both.
const SIGNED: [&str; 8] = [
    "From",
    "Subject",
    "To",
    "Date",
    "Message-ID",
    "Reply-To",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
];

/// A DKIM signer for a domain's key (the bench times its signatures too).
pub fn signer(d: &DkimParams) -> Result<Signer, MimeError> {
    let key = RsaSha256Key::from_pkcs1_pem(&d.private_key_pem)?;
    Ok(DkimSigner::from_key(key)
        .domain(d.domain.clone())
        .selector(d.selector.clone())
        .headers(SIGNED)
        .header_canonicalization(Canonicalization::Relaxed)
        .body_canonicalization(Canonicalization::Relaxed))
}

/// The message's bytes with a DKIM-Signature header in front.
pub fn sign(bytes: Vec<u8>, signer: &Signer) -> Result<Vec<u8>, MimeError> {
    let header = signer.sign(&bytes).map_err(MimeError::Sign)?.to_header();
    let mut signed = Vec::with_capacity(header.len() + bytes.len());
    signed.extend_from_slice(header.as_bytes());
    signed.extend_from_slice(&bytes);
    Ok(signed)
}

/// The envelope and the signed bytes of an email. lettre panics on some input (a line
/// break in a display name, in 0.11): unguarded, the panic took the mailer's arbiter down
/// and every later delivery failed with "Mailbox has closed". Here it fails this email
/// alone, with the reason. The edge refuses such names; records stored before it did
/// still reach this point.
pub fn prepare(email: &OutboundEmail, signer: &Signer) -> Result<(Envelope, Vec<u8>), MimeError> {
    unwind_to_error(|| {
        let message = build(email)?;
        let bytes = sign(message.formatted(), signer)?;
        Ok((message.envelope().clone(), bytes))
    })
}

/// `f`'s result, or its panic as `MimeError::Panicked`. Nothing `f` touches outlives it,
/// so no broken state can be seen after an unwind.
pub fn unwind_to_error<T>(f: impl FnOnce() -> Result<T, MimeError>) -> Result<T, MimeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        Err(MimeError::Panicked(why))
    })
}

/// The email's `Message-ID`: its id at the sender's domain (a webhook payload names it
/// too, so a receiver can match a relay's report to it).
pub fn message_id(email: &OutboundEmail) -> String {
    format!("<{}@{}>", email.id, email.from.email.domain())
}

/// The message, and its envelope sender and recipient.
pub fn build(email: &OutboundEmail) -> Result<Message, MimeError> {
    let from = mailbox(email.from.name.clone(), &email.from.email)?;
    let to = email.to.email.address().ok_or(MimeError::Erased)?;
    let mut b = Message::builder()
        .from(from)
        .to(mailbox(email.to.name.clone(), to)?)
        .subject(email.subject.clone())
        .message_id(Some(message_id(email)));
    if let Some(r) = &email.reply_to {
        b = b.reply_to(mailbox(None, r)?);
    }
    for (name, value) in &email.headers {
        let name = HeaderName::new_from_ascii(name.clone())
            .map_err(|e| MimeError::Header(name.clone(), e))?;
        b = b.raw_header(HeaderValue::new(name, value.clone()));
    }
    let html = document::wrap(&email.html, &email.subject);
    let text = match &email.text {
        Some(text) => text.clone(),
        None => plain_text::from_html(&html),
    };
    let body = MultiPart::alternative_plain_html(text, html);
    let message = if email.attachments.is_empty() {
        b.multipart(body)
    } else {
        let mut mp = MultiPart::mixed().multipart(body);
        for a in &email.attachments {
            // A type lettre does not read goes as plain bytes.
            let ct = ContentType::parse(&a.content_type).unwrap_or_else(|_| octet_stream());
            mp = mp.singlepart(Attachment::new(a.filename.clone()).body(a.data.clone(), ct));
        }
        b.multipart(mp)
    }
    .map_err(MimeError::Build)?;
    Ok(message)
}

fn octet_stream() -> ContentType {
    ContentType::parse("application/octet-stream").unwrap_or(ContentType::TEXT_PLAIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContactId, EmailId, EmailStatus, Mailbox, ProjectId, Recipient};

    fn address(s: &str) -> EmailAddress {
        EmailAddress::parse(s).unwrap()
    }

    fn email(from_name: &str) -> OutboundEmail {
        OutboundEmail {
            id: EmailId::new(),
            project: ProjectId::new(),
            contact_id: ContactId::new(),
            to: Mailbox::to(Some("Ada".into()), &address("ada@example.com")),
            from: Mailbox::new(Some(from_name.into()), &address("news@sender.test")),
            reply_to: None,
            subject: "Hello".into(),
            html: "<p>Hi</p>".into(),
            headers: Vec::new(),
            attachments: Vec::new(),
            text: None,
            attachments_id: None,
            marketing: false,
            campaign_id: None,
            workflow_execution_id: None,
            status: EmailStatus::Queued,
            attempts: 0,
            last_error: None,
            due_at: 0,
            created_at: 0,
            sent_at: None,
        }
    }

    fn test_signer() -> Signer {
        let key = crate::domain::dkim::generate().unwrap();
        signer(&DkimParams {
            domain: "sender.test".into(),
            selector: key.selector,
            private_key_pem: key.private_key_pem,
            aligned_return_path: None,
        })
        .unwrap()
    }

    #[test]
    fn a_stored_name_with_a_line_break_fails_its_email_instead_of_panicking() {
        let signer = test_signer();
        // As a template saved before the edge refused such names would give it.
        let err = prepare(&email("Evil\r\nBcc: all@example.com"), &signer)
            .expect_err("a CRLF in a display name cannot make a message");
        assert!(
            matches!(err, MimeError::Panicked(_)),
            "lettre 0.11 panics here; the guard turns that into an error: {err:?}"
        );
        let (envelope, bytes) = prepare(&email("Newsletter"), &signer).unwrap();
        assert_eq!(envelope.to().len(), 1);
        assert!(String::from_utf8_lossy(&bytes).contains("From: Newsletter <news@sender.test>"));
    }

    #[test]
    fn an_erased_recipient_fails_its_email_and_is_never_an_envelope_address() {
        let mut erased = email("Newsletter");
        erased.to.email = Recipient::Erased;
        let err = prepare(&erased, &test_signer()).expect_err("nobody to send to");
        assert!(matches!(err, MimeError::Erased), "{err:?}");
    }

    #[test]
    fn the_guard_reports_a_panic_with_its_message() {
        let caught = unwind_to_error::<()>(|| panic!("boom {}", 7));
        assert!(matches!(caught, Err(MimeError::Panicked(m)) if m == "boom 7"));
        let caught = unwind_to_error::<()>(|| std::panic::panic_any(3u8));
        assert!(matches!(caught, Err(MimeError::Panicked(m)) if m == "no message"));
        assert!(unwind_to_error(|| Ok(5)).is_ok_and(|n| n == 5));
    }
}
