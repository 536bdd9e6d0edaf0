//! An outgoing email: rendered once when it is queued, then carried through the outbox
//! to SMTP. Its status moves QUEUED -> SENT, or -> BOUNCED (permanent failure), or ->
//! FAILED (transient failures past `sending.max_attempts`).

use serde::{Deserialize, Serialize};

use super::{CampaignId, ContactId, EmailAddress, EmailId, ProjectId, Timestamp};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EmailStatus {
    Queued,
    Sending,
    Sent,
    Failed,
    Bounced,
}

impl EmailStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EmailStatus::Queued => "QUEUED",
            EmailStatus::Sending => "SENDING",
            EmailStatus::Sent => "SENT",
            EmailStatus::Failed => "FAILED",
            EmailStatus::Bounced => "BOUNCED",
        }
    }
}

/// A name and an address, as in `"Ada" <ada@example.com>`. The address stays typed from
/// the edge to the SMTP envelope: stored as the string it always was (the serde forms
/// of `EmailAddress` and `Recipient` write a `String`'s bytes), checked when it is read,
/// so no later hop parses it again and none can drop it for not parsing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mailbox<A = EmailAddress> {
    pub name: Option<String>,
    pub email: A,
}

impl Mailbox {
    pub fn new(name: Option<String>, email: &EmailAddress) -> Self {
        Mailbox {
            name,
            email: email.clone(),
        }
    }
}

impl Mailbox<Recipient> {
    pub fn to(name: Option<String>, email: &EmailAddress) -> Self {
        Mailbox {
            name,
            email: Recipient::Address(email.clone()),
        }
    }
}

/// Whom a stored email went to: its address, or nobody once the contact was erased.
/// Stored as a string: the address, or `ERASED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    Address(EmailAddress),
    Erased,
}

impl Recipient {
    /// What an erased email's address becomes in its stored record. Not a deliverable
    /// address (no dot in the domain), so it never reads back as one.
    pub const ERASED: &'static str = "erased@invalid";

    pub fn address(&self) -> Option<&EmailAddress> {
        match self {
            Recipient::Address(a) => Some(a),
            Recipient::Erased => None,
        }
    }

    pub fn is_erased(&self) -> bool {
        matches!(self, Recipient::Erased)
    }

    pub fn as_str(&self) -> &str {
        match self {
            Recipient::Address(a) => a.as_str(),
            Recipient::Erased => Self::ERASED,
        }
    }
}

impl std::fmt::Display for Recipient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Recipient {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Recipient {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == Self::ERASED {
            return Ok(Recipient::Erased);
        }
        EmailAddress::parse(&s)
            .map(Recipient::Address)
            .map_err(super::email::stored_error)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub filename: String,
    pub content_type: String,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboundEmail {
    pub id: EmailId,
    pub project: ProjectId,
    pub contact_id: ContactId,
    pub to: Mailbox<Recipient>,
    pub from: Mailbox,
    pub reply_to: Option<EmailAddress>,
    pub subject: String,
    pub html: String,
    pub headers: Vec<(String, String)>,
    /// Filled at delivery from the send's one stored copy (`attachments_id`); never
    /// stored with the record, so a send to 100 recipients keeps its files once.
    #[serde(skip)]
    pub attachments: Vec<Attachment>,
    /// The sender's own text/plain part: like `attachments`, filled at delivery (from
    /// `keys::email_text`), never stored with the record.
    #[serde(skip)]
    pub text: Option<String>,
    /// The send's attachments, under `keys::attachments`.
    pub attachments_id: Option<EmailId>,
    pub marketing: bool,
    /// The campaign this email is part of (its stats count it).
    pub campaign_id: Option<CampaignId>,
    /// The workflow execution that sent it.
    pub workflow_execution_id: Option<super::ExecutionId>,
    pub status: EmailStatus,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When the outbox entry for this email falls due (ms since the epoch).
    pub due_at: i64,
    pub created_at: i64,
    pub sent_at: Option<i64>,
}

/// An open or a click on a tracked link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    Open,
    Click,
}

/// Tracked opens and clicks of one email (every recorded hit), and when each was first
/// seen. Kept apart from the email's record, so a hit rewrites a few bytes, not the
/// email's HTML.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Engagement {
    pub opens: u32,
    pub clicks: u32,
    pub opened_at: Option<i64>,
    pub clicked_at: Option<i64>,
    /// Read from the email's record at the first hit, so later hits need not read it.
    pub campaign_id: Option<CampaignId>,
    pub contact_id: ContactId,
    pub to: Recipient,
}

impl Engagement {
    /// No hit yet on `email`.
    pub fn of(email: &OutboundEmail) -> Self {
        Engagement {
            opens: 0,
            clicks: 0,
            opened_at: None,
            clicked_at: None,
            campaign_id: email.campaign_id,
            contact_id: email.contact_id,
            to: email.to.email.clone(),
        }
    }
}

impl OutboundEmail {
    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::codec::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        crate::codec::decode(bytes).map_err(|e| Error::storage(format!("email record: {e}")))
    }

    pub fn created(&self) -> Timestamp {
        self.created_at.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode, encode};

    /// The record's address fields as they were stored before they were typed.
    #[derive(Serialize, Deserialize)]
    struct OldMailbox {
        name: Option<String>,
        email: String,
    }

    fn old(name: Option<&str>, email: &str) -> Vec<u8> {
        encode(&OldMailbox {
            name: name.map(str::to_owned),
            email: email.to_owned(),
        })
        .unwrap()
    }

    #[test]
    fn a_mailbox_stored_with_a_string_address_reads_typed_and_writes_the_same_bytes() {
        let written = old(Some("Ada"), "ada@example.com");
        let from: Mailbox = decode(&written).unwrap();
        assert_eq!(from.email.as_str(), "ada@example.com");
        assert_eq!(encode(&from).unwrap(), written);
        let to: Mailbox<Recipient> = decode(&written).unwrap();
        assert_eq!(
            to.email.address().map(EmailAddress::as_str),
            Some("ada@example.com")
        );
        assert_eq!(encode(&to).unwrap(), written);
        assert_eq!(
            encode(&Mailbox::to(Some("Ada".into()), &from.email)).unwrap(),
            written,
            "a new record is written as the old one was"
        );
    }

    #[test]
    fn an_erased_recipient_reads_as_nobody_and_writes_the_old_marker() {
        let written = old(None, Recipient::ERASED);
        let to: Mailbox<Recipient> = decode(&written).unwrap();
        assert_eq!(to.email, Recipient::Erased);
        assert_eq!(to.email.address(), None);
        assert_eq!(encode(&to).unwrap(), written);
        // Only the recipient may be erased: a sender never was.
        assert!(decode::<Mailbox>(&written).is_err());
    }

    #[test]
    fn a_stored_address_that_does_not_parse_is_a_storage_error_not_a_panic() {
        for bad in ["", "no-at-sign", "ada@localhost", "a b@example.com"] {
            let written = old(None, bad);
            for err in [
                decode::<Mailbox>(&written).unwrap_err(),
                decode::<Mailbox<Recipient>>(&written).unwrap_err(),
            ] {
                assert!(matches!(err, Error::Storage(_)), "{bad:?}: {err:?}");
                let said = crate::error::chain(&err);
                assert!(said.contains("a stored address does not parse"), "{said}");
            }
        }
    }

    #[test]
    fn an_email_record_keeps_its_bytes_through_the_typed_fields() {
        let email = OutboundEmail {
            id: EmailId::new(),
            project: ProjectId::new(),
            contact_id: ContactId::new(),
            to: Mailbox::to(None, &EmailAddress::parse("ada@example.com").unwrap()),
            from: Mailbox::new(
                Some("News".into()),
                &EmailAddress::parse("news@sender.test").unwrap(),
            ),
            reply_to: Some(EmailAddress::parse("help@sender.test").unwrap()),
            subject: "Hi".into(),
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
            due_at: 1,
            created_at: 1,
            sent_at: None,
        };
        let written = email.encode().unwrap();
        // The old layout began with the ids, then the two mailboxes and the reply-to
        // as strings: the same bytes.
        let mut old_prefix = encode(&(email.id, email.project, email.contact_id)).unwrap();
        old_prefix.extend(old(None, "ada@example.com"));
        old_prefix.extend(old(Some("News"), "news@sender.test"));
        old_prefix.extend(encode(&Some(String::from("help@sender.test"))).unwrap());
        assert!(written.starts_with(&old_prefix));
        assert_eq!(OutboundEmail::decode(&written).unwrap(), email);
    }
}
