//! The campaign endpoints (API.md section 9), every answer inside `{success, data}`.
//! Handlers parse and map; the rules are in `mailroom_actors::campaign::actions` and
//! `campaign::records`.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::campaigns::{
    AudienceKind, Campaign, CampaignPatch, CampaignStats, CampaignStatus, NewCampaign,
};
use mailroom_actors::engine::segments::{FilterDocument, Group};
use mailroom_actors::model::EmailAddress;
use mailroom_actors::model::{CampaignId, ProjectId, SegmentId, Timestamp};
use mailroom_actors::{Error, FieldCode, Resource};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::envelope;
use super::error::ApiError;
use super::validate::{path_id, Query};
use super::wire::{Description, DisplayName, Html, Instant, Name, Nullable, Subject, Text};
use super::AppState;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CampaignView {
    id: String,
    name: String,
    description: Option<String>,
    subject: String,
    body: String,
    from: String,
    from_name: Option<String>,
    reply_to: Option<String>,
    /// The audience: ALL, SEGMENT or FILTERED.
    #[serde(rename = "type")]
    kind: &'static str,
    segment_id: Option<String>,
    /// The segment filter shape, for FILTERED.
    #[schema(value_type = Option<Object>)]
    audience_filter: Option<serde_json::Value>,
    /// DRAFT, SCHEDULED, SENDING, PAUSED, SENT or CANCELLED.
    status: &'static str,
    /// Why a PAUSED campaign stopped (its bounce or complaint rate); null otherwise.
    paused_reason: Option<String>,
    scheduled_at: Option<String>,
    sent_at: Option<String>,
    created_at: String,
    updated_at: String,
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

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CampaignList {
    campaigns: Vec<CampaignView>,
    cursor: Option<String>,
    has_more: bool,
    total: u64,
}

/// A campaign's counts. `sent` = `delivered` + `bounced` (the relay answered for good);
/// rates are fractions of `sent`. `queued` is what still waits in the outbox,
/// `cancelled` what a cancel dropped from it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    total_recipients: u64,
    queued: u64,
    sent: u64,
    delivered: u64,
    opened: u64,
    clicked: u64,
    bounced: u64,
    complained: u64,
    unsubscribed: u64,
    failed: u64,
    cancelled: u64,
    /// Recipients left out: unsubscribed by the time their batch was queued, or on the
    /// suppression list.
    skipped: u64,
    open_rate: f64,
    click_rate: f64,
    bounce_rate: f64,
    delivery_rate: f64,
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
    email: String,
}

/// Request body of POST /campaigns.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateCampaignRequest {
    name: Name,
    description: Option<Description>,
    /// A template, like a template's subject.
    subject: Subject,
    /// HTML, a template; `{{unsubscribeUrl}}` places the unsubscribe link (else a footer
    /// carries it).
    body: Html,
    /// On a verified domain of the project.
    from: EmailAddress,
    from_name: Option<DisplayName>,
    reply_to: Option<EmailAddress>,
    /// Who receives it: ALL, SEGMENT or FILTERED. Required, unless `type` (the name the
    /// record answers with) gives it instead; a request with neither is a 422 naming
    /// `audienceType`.
    audience_type: Option<AudienceKind>,
    /// An alias of `audienceType`; both with different values are a 422.
    #[serde(rename = "type")]
    kind: Option<AudienceKind>,
    /// Required for SEGMENT.
    segment_id: Option<String>,
    /// Required for FILTERED.
    audience_filter: Option<FilterDocument>,
}

/// Request body of PATCH /campaigns/{id}: the fields to change; null clears an optional one.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateCampaignRequest {
    name: Option<Name>,
    #[serde(default)]
    description: NullableDescription,
    subject: Option<Subject>,
    body: Option<Html>,
    from: Option<EmailAddress>,
    #[serde(default)]
    from_name: NullableName,
    #[serde(default)]
    reply_to: NullableEmail,
    /// ALL, SEGMENT or FILTERED.
    audience_type: Option<AudienceKind>,
    /// An alias of `audienceType`; both with different values are a 422.
    #[serde(rename = "type")]
    kind: Option<AudienceKind>,
    #[serde(default)]
    segment_id: NullableSegment,
    #[serde(default)]
    audience_filter: NullableFilter,
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
    scheduled_at: Option<Instant>,
}

/// Request body of POST /campaigns/{id}/test.
#[derive(Deserialize, ToSchema)]
pub struct TestCampaignRequest {
    email: EmailAddress,
}

/// The campaign as answered, with why it is PAUSED when it is.
fn view(state: &AppState, p: ProjectId, c: &Campaign) -> CampaignView {
    let mut v = CampaignView::from(c);
    if c.status == CampaignStatus::Paused {
        v.paused_reason = state
            .engine
            .campaigns()
            .paused_reason(p, c.id)
            .unwrap_or_default();
    }
    v
}

/// A segment id from a request: one that cannot exist names no segment of this project.
fn segment_id(raw: &str) -> Result<SegmentId, ApiError> {
    path_id(raw, Resource::Segment)
}

/// An audience filter: parsed and checked, and at most `max_bytes` of JSON.
fn audience_filter(doc: &FilterDocument, max_bytes: usize) -> Result<Group, ApiError> {
    doc.parse("audienceFilter", max_bytes)
        .map_err(|e| Error::Validation(e).into())
}

/// The audience a request names, by the specification's `audienceType` or by `type`, the
/// name the record answers with: the two may both be given only when they agree.
fn audience(
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

fn campaign_id(id: &str) -> Result<CampaignId, ApiError> {
    path_id(id, Resource::Campaign)
}

#[utoipa::path(get, path = "/campaigns", tag = "Campaigns",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "{success, data: CampaignList}", body = CampaignList), (status = 422)),
    security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let page = Query::parse(req.query_string())?.page()?;
    let page = state.engine.campaigns().list(p.id, page).await?;
    let has_more = page.has_more();
    Ok(envelope::ok(CampaignList {
        campaigns: page.items.iter().map(|c| view(&state, p.id, c)).collect(),
        cursor: page.next_cursor,
        has_more,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/campaigns", tag = "Campaigns", request_body = CreateCampaignRequest,
    responses((status = 201, description = "{success, data: CampaignView}", body = CampaignView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(req): Body<CreateCampaignRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let new = req.into_new(state.limits.max_data_bytes)?;
    let c = state.engine.campaigns().create(p.id, new).await?;
    Ok(envelope::created(view(&state, p.id, &c)))
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

#[utoipa::path(get, path = "/campaigns/{id}", tag = "Campaigns",
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: CampaignView}", body = CampaignView), (status = 404)),
    security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let c = state.engine.campaigns().get(p.id, id)?;
    Ok(envelope::ok(view(&state, p.id, &c)))
}

#[utoipa::path(patch, path = "/campaigns/{id}", tag = "Campaigns", request_body = UpdateCampaignRequest,
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: CampaignView}", body = CampaignView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(req): Body<UpdateCampaignRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let max = state.limits.max_data_bytes;
    let audience_filter = req
        .audience_filter
        .try_change(|doc| audience_filter(&doc, max))?;
    let segment = req.segment_id.try_change(|raw| segment_id(&raw))?;
    let audience = audience(req.audience_type, req.kind)?;
    let text = |t: Text<_>| t.into_string();
    let patch = CampaignPatch {
        name: req.name.map(Text::into_string),
        description: req.description.change().map(|d| d.map(text)),
        subject: req.subject.map(Text::into_string),
        body: req.body.map(Text::into_string),
        from: req.from,
        from_name: req
            .from_name
            .change()
            .map(|n| n.map(DisplayName::into_string)),
        reply_to: req.reply_to.change(),
        audience,
        segment_id: segment,
        audience_filter,
    };
    let c = state.engine.campaigns().update(p.id, id, patch).await?;
    Ok(envelope::ok(view(&state, p.id, &c)))
}

#[utoipa::path(delete, path = "/campaigns/{id}", tag = "Campaigns",
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 204), (status = 404), (status = 409)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    state.engine.campaigns().delete(p.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(post, path = "/campaigns/{id}/send", tag = "Campaigns", request_body = SendCampaignRequest,
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: CampaignView}", body = CampaignView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn send(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    body: web::Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let c = state
        .engine
        .campaigns()
        .send(p.id, id, send_at(&body)?)
        .await?;
    Ok(envelope::ok(view(&state, p.id, &c)))
}

/// When the optional body of POST /campaigns/{id}/send says to send: None is now.
fn send_at(body: &[u8]) -> Result<Option<Timestamp>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let req: SendCampaignRequest = super::body::parse(body)?;
    Ok(req.scheduled_at.map(|at| Timestamp::from(at.0)))
}

#[utoipa::path(post, path = "/campaigns/{id}/cancel", tag = "Campaigns",
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: CampaignView}", body = CampaignView), (status = 404), (status = 409)),
    security(("bearer" = [])))]
pub async fn cancel(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let c = state.engine.campaigns().cancel(p.id, id).await?;
    Ok(envelope::ok(view(&state, p.id, &c)))
}

#[utoipa::path(post, path = "/campaigns/{id}/resume", tag = "Campaigns",
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: CampaignView}", body = CampaignView), (status = 404),
              (status = 409, description = "the campaign is not PAUSED")),
    security(("bearer" = [])))]
pub async fn resume(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let c = state.engine.campaigns().resume(p.id, id).await?;
    Ok(envelope::ok(view(&state, p.id, &c)))
}

#[utoipa::path(post, path = "/campaigns/{id}/test", tag = "Campaigns", request_body = TestCampaignRequest,
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: {email}}", body = TestSent), (status = 404), (status = 422)),
    security(("bearer" = [])))]
pub async fn test(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(TestCampaignRequest { email: to }): Body<TestCampaignRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let email = state.engine.campaigns().test(p.id, id, to).await?;
    Ok(envelope::ok(TestSent {
        email: email.to_string(),
    }))
}

#[utoipa::path(get, path = "/campaigns/{id}/stats", tag = "Campaigns",
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: StatsView}", body = StatsView), (status = 404)),
    security(("bearer" = [])))]
pub async fn stats(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let s = state.engine.campaigns().stats(p.id, id)?;
    Ok(envelope::ok(StatsView::from(s)))
}
