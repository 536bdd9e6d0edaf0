//! Campaigns: create with an audience (everyone, or a segment), preview, test send,
//! send now, schedule, cancel, and the stats, live while it sends.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::campaigns::{Campaign, CampaignStatus};
use mailroom_actors::engine::requests::parse_instant;
use mailroom_actors::model::{CampaignId, EmailAddress, PageRequest, Timestamp};
use mailroom_actors::{Error, FieldCode};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::body;
use crate::api::campaigns::{CreateCampaignRequest, StatsView};
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub struct CampaignForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    from: String,
    /// `ALL`, or a segment's id.
    #[serde(default)]
    audience: String,
}

fn campaign_id(raw: &str) -> Result<CampaignId, PageError> {
    raw.parse().map_err(|_| PageError::NotFound)
}

pub async fn list(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let p = signed.project;
    let campaigns = state
        .engine
        .campaigns()
        .list(p, PageRequest::first(100))
        .await?
        .items;
    let segments = state
        .engine
        .segments()
        .list(p, PageRequest::first(100))
        .await?
        .items;
    let body = html! {
        @if campaigns.is_empty() { p { "No campaigns yet." } } @else {
            table {
                caption.visually-hidden { "Campaigns" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Status" } th scope="col" { "Subject" } th scope="col" { "Created" } } }
                tbody {
                    @for c in &campaigns {
                        tr {
                            td { a href={ "/app/campaigns/" (c.id) } { (c.name) } }
                            td { (c.status.as_str()) }
                            td { (c.subject) }
                            td { (c.created_at.to_iso()) }
                        }
                    }
                }
            }
        }
        h2 { "New campaign" }
        form #campaign-form method="post" action="/app/campaigns" {
            (csrf(&signed))
            label for="name" { "Name" }
            input #name type="text" name="name" required maxlength="200";
            label for="from" { "From (an address of a verified domain)" }
            input #from type="email" name="from" required;
            label for="subject" { "Subject" }
            input #subject type="text" name="subject" required;
            label for="body" { "Body (HTML; " code { "{{variable}}" } " as in templates)" }
            textarea #body name="body" spellcheck="false" required {}
            label for="audience" { "Audience" }
            select #audience name="audience" {
                option value="ALL" { "Every subscribed contact" }
                @for s in &segments { option value=(s.id) { "Segment: " (s.name) } }
            }
            button type="submit" { "Create the campaign" }
        }
    };
    Ok(layout::page(&signed, "/app/campaigns", "Campaigns", body))
}

pub async fn create(
    Posted(signed, form): Posted<CampaignForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let mut request = json!({
        "name": form.name,
        "subject": form.subject,
        "body": form.body,
        "from": form.from.trim(),
        "audienceType": "ALL",
    });
    if form.audience != "ALL" && !form.audience.is_empty() {
        request["audienceType"] = json!("SEGMENT");
        request["segmentId"] = json!(form.audience);
    }
    let req: CreateCampaignRequest = body::parse(request.to_string().as_bytes())?;
    let new = req.into_new(state.limits.max_data_bytes)?;
    let c = state.engine.campaigns().create(signed.project, new).await?;
    Ok(super::see_other(&format!("/app/campaigns/{}", c.id)))
}

fn stats_json(state: &AppState, signed: &Signed, c: &Campaign) -> Result<Value, PageError> {
    let s = state.engine.campaigns().stats(signed.project, c.id)?;
    let mut v = serde_json::to_value(StatsView::from(s)).unwrap_or_default();
    v["status"] = json!(c.status.as_str());
    v["done"] = json!(
        matches!(
            c.status,
            CampaignStatus::Sent | CampaignStatus::Cancelled | CampaignStatus::Paused
        ) || (c.status == CampaignStatus::Draft)
    );
    Ok(v)
}

fn stat(v: &Value, name: &str, label: &str) -> Markup {
    html! { div { dt { (label) } dd id={ "stat-" (name) } data-field=(name) { (v[name]) } } }
}

pub async fn show(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = campaign_id(&id)?;
    let c = state.engine.campaigns().get(signed.project, id)?;
    let v = stats_json(&state, &signed, &c)?;
    let preview = state
        .engine
        .templates()
        .preview(signed.project, c.subject.clone(), c.body.clone(), None)
        .await;
    let editable = matches!(c.status, CampaignStatus::Draft | CampaignStatus::Scheduled);
    let paused = state.engine.campaigns().paused_reason(signed.project, id)?;
    let action = |what: &str| format!("/app/campaigns/{id}/{what}");
    let body = html! {
        dl {
            dt { "From" } dd { (c.from.as_str()) }
            dt { "Audience" } dd { (c.audience.as_str()) @if let Some(s) = c.segment_id { " (" a href="/app/segments" { (s) } ")" } }
            @if let Some(at) = c.scheduled_at { dt { "Scheduled for" } dd { (at.to_iso()) } }
            @if let Some(at) = c.sent_at { dt { "Sent" } dd { (at.to_iso()) } }
        }
        section #stats data-poll={ "/app/campaigns/" (id) "/stats" } data-poll-ms="1000"
            data-state=(if v["done"] == json!(true) { "done" } else { "polling" }) aria-live="polite" aria-labelledby="stats-title" {
            h2 #stats-title { "Stats" }
            p { "Status: " strong #status data-field="status" { (c.status.as_str()) } }
            dl.stats {
                (stat(&v, "totalRecipients", "Recipients"))
                (stat(&v, "queued", "Queued"))
                (stat(&v, "sent", "Sent"))
                (stat(&v, "delivered", "Delivered"))
                (stat(&v, "opened", "Opened"))
                (stat(&v, "clicked", "Clicked"))
                (stat(&v, "bounced", "Bounced"))
                (stat(&v, "unsubscribed", "Unsubscribed"))
                (stat(&v, "failed", "Failed"))
            }
        }
        h2 { "Preview" }
        @match &preview {
            Ok((subject, html)) => {
                p { "Subject: " strong #preview-subject { (subject) } }
                iframe.preview title="Rendered body" sandbox="" srcdoc=(html) {}
            }
            Err(e) => p.error { (e.to_string()) },
        }
        @if editable {
            h2 { "Test send" }
            form #test-form method="post" action=(action("test")) {
                (csrf(&signed))
                label for="test-email" { "Send one copy to" }
                input #test-email type="email" name="email" required;
                button type="submit" class="secondary" { "Send a test" }
            }
            h2 { "Send" }
            form #send-form method="post" action=(action("send")) {
                (csrf(&signed))
                button type="submit" { "Send now" }
            }
            form #schedule-form method="post" action=(action("send")) {
                (csrf(&signed))
                label for="at" { "Or schedule for (UTC)" }
                input #at type="datetime-local" name="at" required;
                button type="submit" class="secondary" { "Schedule" }
            }
        }
        @if c.status == CampaignStatus::Paused {
            p.error #paused-reason role="status" {
                "Paused: " (paused.as_deref().unwrap_or("its bounce or complaint rate passed the limit"))
                ". Check the addresses, then resume to send the rest."
            }
            form #resume-form method="post" action=(action("resume")) {
                (csrf(&signed))
                button type="submit" { "Resume sending" }
            }
        }
        @if matches!(c.status, CampaignStatus::Scheduled | CampaignStatus::Sending | CampaignStatus::Paused) {
            form #cancel-form method="post" action=(action("cancel")) {
                (csrf(&signed))
                button.danger type="submit" { "Cancel the campaign" }
            }
        }
    };
    Ok(layout::page(&signed, "/app/campaigns", &c.name, body))
}

pub async fn stats(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = campaign_id(&id)?;
    let c = state.engine.campaigns().get(signed.project, id)?;
    Ok(HttpResponse::Ok().json(stats_json(&state, &signed, &c)?))
}

#[derive(Deserialize)]
pub struct TestForm {
    #[serde(default)]
    email: String,
}

pub async fn test(
    Posted(signed, form): Posted<TestForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = campaign_id(&id)?;
    let to = EmailAddress::parse(form.email.trim())
        .map_err(|_| Error::field("email", FieldCode::InvalidString, "Invalid email"))?;
    let shown = to.to_string();
    state
        .engine
        .campaigns()
        .test(signed.project, id, to)
        .await?;
    let body = html! {
        p.ok role="status" #test-sent { "A test was queued to " (shown) "." }
        p { a href={ "/app/campaigns/" (id) } { "Back to the campaign" } }
    };
    Ok(layout::page(&signed, "/app/campaigns", "Test sent", body))
}

/// A datetime-local value, read as UTC (it has no zone and may leave out the seconds)
/// by the same parser as the API's `scheduledAt`.
fn scheduled_at(raw: &str) -> Result<Timestamp, PageError> {
    let iso = match raw.len() {
        16 => format!("{raw}:00Z"),
        _ => format!("{raw}Z"),
    };
    parse_instant(&iso).map(Timestamp::from).ok_or_else(|| {
        Error::field(
            "scheduledAt",
            FieldCode::InvalidString,
            "Expected a date and time such as 2026-12-01T09:30",
        )
        .into()
    })
}

#[derive(Deserialize)]
pub struct SendForm {
    /// A datetime-local value (UTC); none sends now.
    at: Option<String>,
}

pub async fn send(
    Posted(signed, form): Posted<SendForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = campaign_id(&id)?;
    let at = form
        .at
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(scheduled_at)
        .transpose()?;
    state
        .engine
        .campaigns()
        .send(signed.project, id, at)
        .await?;
    Ok(super::see_other(&format!("/app/campaigns/{id}")))
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn resume(
    Posted(signed, _): Posted<Empty>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = campaign_id(&id)?;
    state.engine.campaigns().resume(signed.project, id).await?;
    Ok(super::see_other(&format!("/app/campaigns/{id}")))
}

pub async fn cancel(
    Posted(signed, _): Posted<Empty>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = campaign_id(&id)?;
    state.engine.campaigns().cancel(signed.project, id).await?;
    Ok(super::see_other(&format!("/app/campaigns/{id}")))
}
