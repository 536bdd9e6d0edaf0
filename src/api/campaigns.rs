//! The typed requests and views of the campaigns endpoints (handled in
//! `http/campaigns.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::engine::campaigns::{AudienceKind, Campaign, CampaignStats, NewCampaign};
use mailroom_actors::engine::segments::{FilterDocument, Group};
use mailroom_actors::model::EmailAddress;
use mailroom_actors::model::SegmentId;
use mailroom_actors::{Error, FieldCode, Resource};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::ApiError;
use crate::api::validate::path_id;
use crate::api::wire::{Description, DisplayName, Html, Instant, Name, Nullable, Subject, Text};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CampaignView {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub subject: String,
    pub body: String,
    pub from: String,
    pub from_name: Option<String>,
    pub reply_to: Option<String>,
    /// The audience: ALL, SEGMENT or FILTERED.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub segment_id: Option<String>,
    /// The segment filter shape, for FILTERED.
    #[schema(value_type = Option<Object>)]
    pub audience_filter: Option<serde_json::Value>,
    /// DRAFT, SCHEDULED, SENDING, PAUSED, SENT or CANCELLED.
    pub status: &'static str,
    /// Why a PAUSED campaign stopped (its bounce or complaint rate); null otherwise.
    pub paused_reason: Option<String>,
    pub scheduled_at: Option<String>,
    pub sent_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Campaign> for CampaignView {
    fn from(c: &Campaign) -> Self {
        CampaignView {
            id: c.id.to_string(),
            name: c.name.clone(),
            description: c.description.clone(),
            subject: c.subject.clone(),
            body: c.body.clone(),
            from: c.from.to_string(),
            from_name: c.from_name.clone(),
            reply_to: c.reply_to.as_ref().map(|r| r.to_string()),
            kind: c.audience.as_str(),
            segment_id: c.segment_id.map(|s| s.to_string()),
            audience_filter: c.audience_filter.as_ref().map(Group::to_json),
            status: c.status.as_str(),
            paused_reason: None,
            scheduled_at: c.scheduled_at.map(|t| t.to_iso()),
            sent_at: c.sent_at.map(|t| t.to_iso()),
            created_at: c.created_at.to_iso(),
            updated_at: c.updated_at.to_iso(),
        }
    }
}

paged_list!(CampaignList {
    campaigns: CampaignView
});

/// A campaign's counts. `sent` = `delivered` + `bounced` (the relay answered for good);
/// rates are fractions of `sent`. `queued` is what still waits in the outbox,
/// `cancelled` what a cancel dropped from it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    pub total_recipients: u64,
    pub queued: u64,
    pub sent: u64,
    pub delivered: u64,
    pub opened: u64,
    pub clicked: u64,
    pub bounced: u64,
    pub complained: u64,
    pub unsubscribed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Recipients left out: unsubscribed by the time their batch was queued, or on the
    /// suppression list.
    pub skipped: u64,
    pub open_rate: f64,
    pub click_rate: f64,
    pub bounce_rate: f64,
    pub delivery_rate: f64,
}

impl From<CampaignStats> for StatsView {
    fn from(s: CampaignStats) -> Self {
        StatsView {
            total_recipients: s.total_recipients,
            queued: s.queued,
            sent: s.sent(),
            delivered: s.delivered,
            opened: s.opened,
            clicked: s.clicked,
            bounced: s.bounced,
            complained: s.complained,
            unsubscribed: s.unsubscribed,
            failed: s.failed,
            skipped: s.skipped,
            cancelled: s.cancelled,
            open_rate: s.rate(s.opened),
            click_rate: s.rate(s.clicked),
            bounce_rate: s.rate(s.bounced),
            delivery_rate: s.rate(s.delivered),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TestSent {
    /// The id of the test email (`GET /emails/{id}`).
    pub email: String,
}

/// Request body of POST /campaigns.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateCampaignRequest {
    pub name: Name,
    pub description: Option<Description>,
    /// A template, like a template's subject.
    pub subject: Subject,
    /// HTML, a template; `{{unsubscribeUrl}}` places the unsubscribe link (else a footer
    /// carries it).
    pub body: Html,
    /// On a verified domain of the project.
    pub from: EmailAddress,
    pub from_name: Option<DisplayName>,
    pub reply_to: Option<EmailAddress>,
    /// Who receives it: ALL, SEGMENT or FILTERED. Required, unless `type` (the name the
    /// record answers with) gives it instead; a request with neither is a 422 naming
    /// `audienceType`.
    pub audience_type: Option<AudienceKind>,
    /// An alias of `audienceType`; both with different values are a 422.
    #[serde(rename = "type")]
    pub kind: Option<AudienceKind>,
    /// Required for SEGMENT.
    pub segment_id: Option<String>,
    /// Required for FILTERED.
    pub audience_filter: Option<FilterDocument>,
}

/// Request body of PATCH /campaigns/{id}: the fields to change; null clears an optional one.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateCampaignRequest {
    pub name: Option<Name>,
    #[serde(default)]
    pub description: NullableDescription,
    pub subject: Option<Subject>,
    pub body: Option<Html>,
    pub from: Option<EmailAddress>,
    #[serde(default)]
    pub from_name: NullableName,
    #[serde(default)]
    pub reply_to: NullableEmail,
    /// ALL, SEGMENT or FILTERED.
    pub audience_type: Option<AudienceKind>,
    /// An alias of `audienceType`; both with different values are a 422.
    #[serde(rename = "type")]
    pub kind: Option<AudienceKind>,
    #[serde(default)]
    pub segment_id: NullableSegment,
    #[serde(default)]
    pub audience_filter: NullableFilter,
}

// utoipa's derive reads a generic field as a generic of the struct: aliases hide them.
type NullableDescription = Nullable<Description>;
type NullableName = Nullable<DisplayName>;
type NullableEmail = Nullable<EmailAddress>;
/// A segment's id: a string that is no id names no segment (404).
type NullableSegment = Nullable<String>;
type NullableFilter = Nullable<FilterDocument>;

/// Request body of POST /campaigns/{id}/send (optional: no body sends now).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendCampaignRequest {
    /// Missing or past sends now.
    pub scheduled_at: Option<Instant>,
}

/// Request body of POST /campaigns/{id}/test.
#[derive(Deserialize, ToSchema)]
pub struct TestCampaignRequest {
    pub email: EmailAddress,
}

/// A segment id from a request: one that cannot exist names no segment of this project.
pub fn segment_id(raw: &str) -> Result<SegmentId, ApiError> {
    path_id(raw, Resource::Segment)
}

/// An audience filter: parsed and checked, and at most `max_bytes` of JSON.
pub fn audience_filter(doc: &FilterDocument, max_bytes: usize) -> Result<Group, ApiError> {
    doc.parse("audienceFilter", max_bytes)
        .map_err(|e| Error::Validation(e).into())
}

/// The audience a request names, by the specification's `audienceType` or by `type`, the
/// name the record answers with: the two may both be given only when they agree.
pub fn audience(
    audience_type: Option<AudienceKind>,
    kind: Option<AudienceKind>,
) -> Result<Option<AudienceKind>, ApiError> {
    match (audience_type, kind) {
        (Some(a), Some(k)) if a != k => Err(Error::field(
            "audienceType",
            FieldCode::Custom,
            format!(
                "audienceType is {} but type is {}; send one of them",
                a.as_str(),
                k.as_str()
            ),
        )
        .into()),
        (a, k) => Ok(a.or(k)),
    }
}

impl CreateCampaignRequest {
    /// The campaign to make: its audience named once, its filter parsed and within
    /// `max_data_bytes` (the dashboard's form makes one of these too).
    pub fn into_new(self, max_data_bytes: usize) -> Result<NewCampaign, ApiError> {
        let req = self;
        let audience_filter = req
            .audience_filter
            .as_ref()
            .map(|doc| audience_filter(doc, max_data_bytes))
            .transpose()?;
        let Some(audience) = audience(req.audience_type, req.kind)? else {
            return Err(Error::field("audienceType", FieldCode::InvalidType, "Required").into());
        };
        let segment_id = req.segment_id.as_deref().map(segment_id).transpose()?;
        Ok(NewCampaign {
            name: req.name.into_string(),
            description: req.description.map(Text::into_string),
            subject: req.subject.into_string(),
            body: req.body.into_string(),
            from: req.from,
            from_name: req.from_name.map(DisplayName::into_string),
            reply_to: req.reply_to,
            audience,
            segment_id,
            audience_filter,
        })
    }
}
