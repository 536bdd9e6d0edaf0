//! A campaign (API.md section 9): one message to an audience, sent now or at a time.
//!
//! Its status moves DRAFT -> SCHEDULED -> SENDING -> SENT, or DRAFT -> SENDING -> SENT;
//! cancel takes SCHEDULED back to DRAFT and SENDING to CANCELLED. While it sends, the
//! record also carries its progress: the audience, fixed when sending starts (written
//! down in chunks, `keys::campaign_audience`), and how far into it emails are queued.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{CampaignId, EmailAddress, SegmentId, Timestamp};
use crate::segment::Group;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CampaignStatus {
    Draft,
    Scheduled,
    Sending,
    Sent,
    Cancelled,
    /// Stopped by its bounce or complaint rate (appended: stored variants keep their
    /// index); `POST /campaigns/{id}/resume` sends the rest.
    Paused,
}

impl CampaignStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CampaignStatus::Draft => "DRAFT",
            CampaignStatus::Scheduled => "SCHEDULED",
            CampaignStatus::Sending => "SENDING",
            CampaignStatus::Sent => "SENT",
            CampaignStatus::Cancelled => "CANCELLED",
            CampaignStatus::Paused => "PAUSED",
        }
    }
}

/// Who a campaign goes to: always subscribed contacts only. On the wire ALL, SEGMENT or
/// FILTERED (the store keeps the variant's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AudienceKind {
    All,
    Segment,
    Filtered,
}

impl AudienceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AudienceKind::All => "ALL",
            AudienceKind::Segment => "SEGMENT",
            AudienceKind::Filtered => "FILTERED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ALL" => Some(AudienceKind::All),
            "SEGMENT" => Some(AudienceKind::Segment),
            "FILTERED" => Some(AudienceKind::Filtered),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    pub id: CampaignId,
    pub name: String,
    pub description: Option<String>,
    pub subject: String,
    pub body: String,
    pub from: EmailAddress,
    pub from_name: Option<String>,
    pub reply_to: Option<EmailAddress>,
    pub audience: AudienceKind,
    pub segment_id: Option<SegmentId>,
    pub audience_filter: Option<Group>,
    pub status: CampaignStatus,
    pub scheduled_at: Option<Timestamp>,
    pub sent_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub progress: Progress,
}

/// What a caller chooses of a new campaign; the engine gives it its id, its DRAFT
/// status and its times (`campaign::actions::create`).
#[derive(Debug, Clone)]
pub struct NewCampaign {
    pub name: String,
    pub description: Option<String>,
    pub subject: String,
    pub body: String,
    pub from: EmailAddress,
    pub from_name: Option<String>,
    pub reply_to: Option<EmailAddress>,
    pub audience: AudienceKind,
    pub segment_id: Option<SegmentId>,
    pub audience_filter: Option<Group>,
}

impl NewCampaign {
    /// The campaign as it is stored first: a DRAFT, made and changed `now`.
    pub(crate) fn draft(self, now: Timestamp) -> Campaign {
        Campaign {
            id: CampaignId::new(),
            name: self.name,
            description: self.description,
            subject: self.subject,
            body: self.body,
            from: self.from,
            from_name: self.from_name,
            reply_to: self.reply_to,
            audience: self.audience,
            segment_id: self.segment_id,
            audience_filter: self.audience_filter,
            status: CampaignStatus::Draft,
            scheduled_at: None,
            sent_at: None,
            created_at: now,
            updated_at: now,
            progress: Default::default(),
        }
    }
}

/// When a campaign's own rates stop it (`campaigns.pause_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PauseRule {
    pub bounce_rate: f64,
    pub complaint_rate: f64,
    /// Emails the relay must have answered (since the last resume) before it applies.
    pub after: u64,
}

impl Default for PauseRule {
    fn default() -> Self {
        PauseRule {
            bounce_rate: 0.05,
            complaint_rate: 0.003,
            after: 200,
        }
    }
}

impl PauseRule {
    /// Why `now` (the stats since `baseline`, the stats at the last resume) stops the
    /// campaign, if it does.
    pub fn reason(&self, now: &CampaignStats, baseline: &CampaignStats) -> Option<String> {
        let sent = now.sent().saturating_sub(baseline.sent());
        if sent < self.after.max(1) {
            return None;
        }
        let bounced = now.bounced.saturating_sub(baseline.bounced);
        let complained = now.complained.saturating_sub(baseline.complained);
        let (b, c) = (
            bounced as f64 / sent as f64,
            complained as f64 / sent as f64,
        );
        if b > self.bounce_rate {
            Some(format!(
                "bounce rate {:.1}% of {sent} emails passed campaigns.pause_bounce_rate ({:.1}%)",
                b * 100.0,
                self.bounce_rate * 100.0
            ))
        } else if c > self.complaint_rate {
            Some(format!(
                "complaint rate {:.2}% of {sent} emails passed campaigns.pause_complaint_rate ({:.2}%)",
                c * 100.0,
                self.complaint_rate * 100.0
            ))
        } else {
            None
        }
    }
}

/// How far a sending campaign has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Whether the audience is written down (`total` recipients in chunks).
    pub audience_fixed: bool,
    pub total: u64,
    /// Recipients whose emails are queued (or who were skipped): the next starts here.
    pub cursor: u64,
    /// When sending started (ms), for the progress log's rate.
    pub started_at: i64,
}

/// A campaign's counts (API.md section 9, plus `cancelled`), kept as outcomes happen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CampaignStats {
    pub total_recipients: u64,
    /// Emails still waiting in the outbox.
    pub queued: u64,
    /// Accepted by the relay.
    pub delivered: u64,
    /// Refused for good by the recipient's side.
    pub bounced: u64,
    pub failed: u64,
    /// Dropped from the outbox by a cancel.
    pub cancelled: u64,
    /// Recipients who were unsubscribed by the time their batch was queued.
    pub skipped: u64,
    pub opened: u64,
    pub clicked: u64,
    pub complained: u64,
    pub unsubscribed: u64,
}

impl CampaignStats {
    /// Emails the relay answered for good: delivered or bounced.
    pub fn sent(&self) -> u64 {
        self.delivered + self.bounced
    }

    /// `n` of `sent` as a fraction (0 when nothing was sent).
    pub fn rate(&self, n: u64) -> f64 {
        match self.sent() {
            0 => 0.0,
            sent => (n as f64 / sent as f64).min(1.0),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    id: CampaignId,
    name: String,
    description: Option<String>,
    subject: String,
    body: String,
    from: String,
    from_name: Option<String>,
    reply_to: Option<String>,
    audience: AudienceKind,
    segment_id: Option<SegmentId>,
    audience_filter: Option<String>,
    status: CampaignStatus,
    scheduled_at: Option<i64>,
    sent_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    progress: Progress,
}

impl Campaign {
    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::codec::encode(&Stored {
            id: self.id,
            name: self.name.clone(),
            description: self.description.clone(),
            subject: self.subject.clone(),
            body: self.body.clone(),
            from: self.from.to_string(),
            from_name: self.from_name.clone(),
            reply_to: self.reply_to.as_ref().map(|r| r.to_string()),
            audience: self.audience,
            segment_id: self.segment_id,
            audience_filter: self
                .audience_filter
                .as_ref()
                .map(|g| g.to_json().to_string()),
            status: self.status,
            scheduled_at: self.scheduled_at.map(|t| t.millis()),
            sent_at: self.sent_at.map(|t| t.millis()),
            created_at: self.created_at.millis(),
            updated_at: self.updated_at.millis(),
            progress: self.progress,
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::codec::decode(bytes)?;
        let bad = |what: &str| Error::storage(format!("campaign {}: bad {what}", s.id));
        let from = EmailAddress::parse(&s.from).map_err(|_| bad("from"))?;
        let reply_to = match &s.reply_to {
            Some(r) => Some(EmailAddress::parse(r).map_err(|_| bad("replyTo"))?),
            None => None,
        };
        let audience_filter = match &s.audience_filter {
            Some(text) => {
                let v: serde_json::Value =
                    serde_json::from_str(text).map_err(|_| bad("audienceFilter"))?;
                Some(Group::parse(&v, "audienceFilter").map_err(|_| bad("audienceFilter"))?)
            }
            None => None,
        };
        Ok(Campaign {
            id: s.id,
            name: s.name,
            description: s.description,
            subject: s.subject,
            body: s.body,
            from,
            from_name: s.from_name,
            reply_to,
            audience: s.audience,
            segment_id: s.segment_id,
            audience_filter,
            status: s.status,
            scheduled_at: s.scheduled_at.map(Timestamp::from),
            sent_at: s.sent_at.map(Timestamp::from),
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
            progress: s.progress,
        })
    }
}
