//! The campaign endpoints (API.md section 9), every answer inside `{success, data}`.
//! Handlers parse and map; the rules are in `mailroom_actors::campaign::actions` and
//! `campaign::records`.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::campaigns::{Campaign, CampaignPatch, CampaignStatus};
use mailroom_actors::model::{CampaignId, ProjectId, Timestamp};
use mailroom_actors::Resource;

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::envelope;
use crate::api::error::ApiError;
use crate::api::validate::{path_id, Query};
use crate::api::wire::{DisplayName, Text};
use crate::state::AppState;

use crate::api::campaigns::{
    audience, audience_filter, segment_id, CampaignList, CampaignView, CreateCampaignRequest,
    SendCampaignRequest, StatsView, TestCampaignRequest, TestSent, UpdateCampaignRequest,
};
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
    let page = page.map(|c| view(&state, p.id, &c));
    Ok(envelope::ok(CampaignList::from(page)))
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
    let req: SendCampaignRequest = crate::api::body::parse(body)?;
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
