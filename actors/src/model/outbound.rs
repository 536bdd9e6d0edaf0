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

/// A name and an address, as in `"Ada" <ada@example.com>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mailbox {
    pub name: Option<String>,
    pub email: String,
}

impl Mailbox {
    pub fn new(name: Option<String>, email: &EmailAddress) -> Self {
        Mailbox {
            name,
            email: email.to_string(),
        }
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
    pub to: Mailbox,
    pub from: Mailbox,
    pub reply_to: Option<String>,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Engagement {
    pub opens: u32,
    pub clicks: u32,
    pub opened_at: Option<i64>,
    pub clicked_at: Option<i64>,
    /// Read from the email's record at the first hit, so later hits need not read it.
    pub campaign_id: Option<CampaignId>,
    pub contact_id: ContactId,
    pub to: String,
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
