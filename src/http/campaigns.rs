//! The campaign endpoints (API.md section 9), every answer inside `{success, data}`.
//! Handlers parse and map; the rules are in `mailroom_actors::campaign::actions` and
//! `project::campaigns`.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::campaign::actions;
use mailroom_actors::model::{
    AudienceKind, Campaign, CampaignId, CampaignStats, CampaignStatus, SegmentId, Timestamp,
};
use mailroom_actors::project::campaign_stats;
use mailroom_actors::project::campaigns::{self as stored, CampaignPatch};
use mailroom_actors::segment::filter::parse_instant;
use mailroom_actors::segment::Group;
use mailroom_actors::{Error, FieldCode, Resource};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::JsonBody;
use super::envelope;
use super::error::ApiError;
use super::validate::{path_id, Fields, Query};
use super::{blocking, AppState};

const MAX_NAME: usize = 200;
const MAX_DESCRIPTION: usize = 1000;
/// RFC 5322 caps a header line at 998 characters.
const MAX_SUBJECT: usize = 998;
const MAX_BODY: usize = 1 << 20;
const AUDIENCES: [&str; 3] = ["ALL", "SEGMENT", "FILTERED"];

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
    audience_filter: Option<Value>,
    /// DRAFT, SCHEDULED, SENDING, SENT or CANCELLED.
    status: &'static str,
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

/// Request body of POST /campaigns, and of PATCH /campaigns/{id} (all optional there).
#[allow(dead_code)]
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct CampaignRequest {
    name: String,
    description: Option<String>,
    /// A template, like a template's subject.
    subject: String,
    /// HTML, a template; `{{unsubscribeUrl}}` places the unsubscribe link (else a footer
    /// carries it).
    body: String,
    /// On a verified domain of the project.
    from: String,
    from_name: Option<String>,
    reply_to: Option<String>,
    /// ALL (default), SEGMENT or FILTERED.
    #[schema(rename = "type")]
    kind: Option<String>,
    /// Required for SEGMENT.
    segment_id: Option<String>,
    /// Required for FILTERED: the segment filter shape.
    #[schema(value_type = Option<Object>)]
    audience_filter: Option<Value>,
}

/// Request body of POST /campaigns/{id}/send.
#[allow(dead_code)]
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct SendCampaignRequest {
    /// ISO 8601; missing or past sends now.
    scheduled_at: Option<String>,
}

/// Request body of POST /campaigns/{id}/test.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct TestCampaignRequest {
    email: String,
}

fn view(c: &Campaign) -> CampaignView {
    CampaignView::from(c)
}

/// `{success, data}` with 201.
fn created<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Created().json(serde_json::json!({"success": true, "data": data}))
}

/// The audience fields of a body: the type, and a segment or filter. On PATCH
/// (`patch`), absent fields stay as they are and null clears.
struct AudienceFields {
    kind: Option<AudienceKind>,
    segment_id: Option<Option<SegmentId>>,
    filter: Option<Option<Group>>,
    /// A `segmentId` that is no id at all: 404, as for one that names no segment.
    bad_segment: Option<ApiError>,
}

impl AudienceFields {
    fn check(&mut self) -> Result<(), ApiError> {
        self.bad_segment.take().map_or(Ok(()), Err)
    }
}

fn audience(f: &mut Fields, body: &Value, max_filter_bytes: usize) -> AudienceFields {
    let kind = f
        .opt_enum("type", &AUDIENCES)
        .and_then(|s| AudienceKind::parse(&s));
    let mut bad_segment = None;
    let segment_id = match body.get("segmentId") {
        None => None,
        Some(Value::Null) => Some(None),
        // An id that cannot exist names no segment of this project (clarification 10).
        Some(Value::String(s)) => match path_id::<SegmentId>(s, Resource::Segment) {
            Ok(id) => Some(Some(id)),
            Err(e) => {
                bad_segment = Some(e);
                None
            }
        },
        Some(other) => {
            f.wrong_type("segmentId", "string", other);
            None
        }
    };
    let filter = match body.get("audienceFilter") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) if serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()) > max_filter_bytes => {
            f.error(
                "audienceFilter",
                FieldCode::TooBig,
                format!("audienceFilter must be at most {max_filter_bytes} bytes of JSON"),
            );
            None
        }
        Some(v) => match Group::parse(v, "audienceFilter") {
            Ok(g) => Some(Some(g)),
            Err(errors) => {
                f.extend(errors);
                None
            }
        },
    };
    AudienceFields {
        kind,
        segment_id,
        filter,
        bad_segment,
    }
}

/// An optional string field of a PATCH: absent stays, null clears.
fn nullable(f: &mut Fields, body: &Value, field: &str, max: usize) -> Option<Option<String>> {
    match body.get(field) {
        None => None,
        Some(Value::Null) => Some(None),
        Some(_) => f.opt_string(field, max).map(Some),
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
    let store = state.store.clone();
    let page = blocking(move || stored::list(&*store, p.id, &page)).await?;
    let has_more = page.has_more();
    Ok(envelope::ok(CampaignList {
        campaigns: page.items.iter().map(view).collect(),
        cursor: page.next_cursor,
        has_more,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/campaigns", tag = "Campaigns", request_body = CampaignRequest,
    responses((status = 201, description = "{success, data: CampaignView}", body = CampaignView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::of(&body)?;
    let name = f.string("name", MAX_NAME);
    let description = f.opt_string("description", MAX_DESCRIPTION);
    let subject = f.string("subject", MAX_SUBJECT);
    let html = f.string("body", MAX_BODY);
    let from = f.email("from");
    let from_name = f.opt_string("fromName", MAX_NAME);
    let reply_to = f.opt_email("replyTo");
    let mut a = audience(&mut f, &body, state.limits.max_data_bytes);
    f.finish()?;
    a.check()?;
    let (Some(name), Some(subject), Some(html), Some(from)) = (name, subject, html, from) else {
        return Err(Error::Internal("validated fields went missing".into()).into());
    };
    let now = Timestamp::from(state.clock.now());
    let campaign = Campaign {
        id: CampaignId::new(),
        name,
        description,
        subject,
        body: html,
        from,
        from_name,
        reply_to,
        audience: a.kind.unwrap_or(AudienceKind::All),
        segment_id: a.segment_id.flatten(),
        audience_filter: a.filter.flatten(),
        status: CampaignStatus::Draft,
        scheduled_at: None,
        sent_at: None,
        created_at: now,
        updated_at: now,
        progress: Default::default(),
    };
    let c = actions::create(&state.registry, p.id, campaign).await?;
    Ok(created(view(&c)))
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
    let c = stored::get(&*state.store, p.id, id)?;
    Ok(envelope::ok(view(&c)))
}

#[utoipa::path(patch, path = "/campaigns/{id}", tag = "Campaigns", request_body = CampaignRequest,
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: CampaignView}", body = CampaignView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let mut f = Fields::of(&body)?;
    let name = f.opt_string("name", MAX_NAME);
    let description = nullable(&mut f, &body, "description", MAX_DESCRIPTION);
    let subject = f.opt_string("subject", MAX_SUBJECT);
    let html = f.opt_string("body", MAX_BODY);
    let from = f.opt_email("from");
    let from_name = nullable(&mut f, &body, "fromName", MAX_NAME);
    let reply_to = match body.get("replyTo") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(_) => f.opt_email("replyTo").map(Some),
    };
    let mut a = audience(&mut f, &body, state.limits.max_data_bytes);
    f.finish()?;
    a.check()?;
    let patch = CampaignPatch {
        name,
        description,
        subject,
        body: html,
        from,
        from_name,
        reply_to,
        audience: a.kind,
        segment_id: a.segment_id,
        audience_filter: a.filter,
    };
    let c = actions::update(&state.registry, p.id, id, patch).await?;
    Ok(envelope::ok(view(&c)))
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
    actions::delete(&state.registry, p.id, id).await?;
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
    // The body is optional: none at all sends now.
    let at = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let body: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::BadRequest(format!("The body is not valid JSON: {e}")))?;
        let mut f = Fields::of(&body)?;
        let at = match f.raw("scheduledAt") {
            None => None,
            Some(Value::String(s)) => match parse_instant(s) {
                Some(ms) => Some(Timestamp::from(ms)),
                None => {
                    f.error(
                        "scheduledAt",
                        FieldCode::InvalidString,
                        "Invalid datetime: expected ISO 8601, such as 2026-12-01T09:00:00Z",
                    );
                    None
                }
            },
            Some(other) => {
                f.wrong_type("scheduledAt", "string", other);
                None
            }
        };
        f.finish()?;
        at
    };
    let c = actions::send(&state.registry, &state.campaigns, p.id, id, at).await?;
    Ok(envelope::ok(view(&c)))
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
    let c = actions::cancel(&state.registry, p.id, id).await?;
    Ok(envelope::ok(view(&c)))
}

#[utoipa::path(post, path = "/campaigns/{id}/test", tag = "Campaigns", request_body = TestCampaignRequest,
    params(("id" = String, Path, description = "Campaign id")),
    responses((status = 200, description = "{success, data: {email}}", body = TestSent), (status = 404), (status = 422)),
    security(("bearer" = [])))]
pub async fn test(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = campaign_id(&id)?;
    let mut f = Fields::of(&body)?;
    let to = f.email("email");
    f.finish()?;
    let Some(to) = to else {
        return Err(Error::Internal("validated fields went missing".into()).into());
    };
    let email = actions::test(&state.registry, &state.templates, p.id, id, to).await?;
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
    stored::get(&*state.store, p.id, id)?;
    let s = campaign_stats::load(&*state.store, p.id, id)?;
    Ok(envelope::ok(StatsView::from(s)))
}
