//! Event webhooks: each endpoint with its events, state and latest deliveries, a test
//! event, enable and disable, delete, and a form to add one (its secret shown once).

use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::body;
use crate::api::webhooks::CreateWebhookRequest;
use crate::state::AppState;
use mailroom_actors::engine::webhooks::{NewWebhook, WebhookPatch};
use mailroom_actors::model::{Timestamp, WebhookId};

const TITLE: &str = "Webhooks";

fn webhook_id(raw: &str) -> Result<WebhookId, PageError> {
    raw.parse().map_err(|_| PageError::NotFound)
}

pub async fn list(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let hooks = state.engine.webhooks().list(signed.project)?;
    let mut sections = Vec::new();
    for w in &hooks {
        let recent = state
            .engine
            .webhooks()
            .deliveries(signed.project, w.id, 10)?;
        sections.push(html! {
            section.webhook aria-labelledby={ "w-" (w.id) } {
                h2 id={ "w-" (w.id) } {
                    code { (w.url) } " "
                    span.status class=(if w.enabled { "ok" } else { "error" }) {
                        @if w.enabled { "enabled" } @else { "disabled" }
                    }
                }
                p {
                    "Events: " (w.events.join(", "))
                    @if let Some(d) = &w.description { " · " (d) }
                }
                @if let Some(reason) = &w.disabled_reason { p.muted { "Disabled by Mailroom: " (reason) "." } }
                @if recent.is_empty() {
                    p.muted { "No deliveries yet." }
                } @else {
                    table {
                        caption { "Latest deliveries" }
                        thead { tr { th scope="col" { "Event" } th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "Answer" } th scope="col" { "When" } } }
                        tbody {
                            @for d in &recent {
                                tr {
                                    td { (d.kind) }
                                    td { (d.status.as_str()) }
                                    td { (d.attempts) }
                                    td {
                                        @if let Some(code) = d.status_code { (code) }
                                        @else if let Some(e) = &d.error { (e) }
                                    }
                                    td { (Timestamp::from(d.attempted_at.unwrap_or(d.created_at)).to_iso()) }
                                }
                            }
                        }
                    }
                }
                div.actions {
                    form method="post" action={ "/app/webhooks/" (w.id) "/test" } {
                        (csrf(&signed))
                        button type="submit" { "Send a test event" }
                    }
                    form method="post" action={ "/app/webhooks/" (w.id) "/enabled" } {
                        (csrf(&signed))
                        input type="hidden" name="enabled" value=(if w.enabled { "false" } else { "true" });
                        button type="submit" class="secondary" { @if w.enabled { "Disable" } @else { "Enable" } }
                    }
                    form method="post" action={ "/app/webhooks/" (w.id) "/delete" } {
                        (csrf(&signed))
                        button type="submit" class="secondary" aria-label={ "Delete the endpoint " (w.url) } { "Delete" }
                    }
                }
            }
        });
    }
    let body = html! {
        @if hooks.is_empty() { p { "No endpoints yet: add one to have events pushed to your app." } }
        @for s in &sections { (s) }
        h2 { "Add an endpoint" }
        form #webhook-form method="post" action="/app/webhooks" {
            (csrf(&signed))
            label for="url" { "URL" }
            input #url type="url" name="url" required placeholder="https://example.com/mailroom";
            label for="events" { "Events (comma separated, or * for every event)" }
            input #events type="text" name="events" required value="*";
            button type="submit" { "Add" }
        }
        p.muted { "Deliveries are signed as Standard Webhooks sign them; see the API documentation for how to verify them." }
    };
    Ok(layout::page(&signed, "/app/webhooks", TITLE, body))
}

#[derive(Deserialize)]
pub struct WebhookForm {
    #[serde(default)]
    url: String,
    #[serde(default)]
    events: String,
}

pub async fn create(
    Posted(signed, form): Posted<WebhookForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let events: Vec<&str> = form
        .events
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    // The API's own request, so that the form gets the API's checks and errors.
    let req: CreateWebhookRequest = body::parse(
        json!({"url": form.url.trim(), "events": events})
            .to_string()
            .as_bytes(),
    )?;
    let (url, events) = req.into_parts();
    let made = state
        .engine
        .webhooks()
        .create(
            signed.project,
            NewWebhook {
                url,
                events,
                enabled: true,
                description: None,
            },
        )
        .await
        .map_err(crate::api::error::ApiError::from)?;
    Ok(secret_page(
        &signed,
        &made.url,
        &made.secret,
        "The endpoint was added.",
    ))
}

fn secret_page(signed: &Signed, url: &str, secret: &str, said: &str) -> HttpResponse {
    let body: Markup = html! {
        p.ok role="status" { (said) " Copy its signing secret now: it is not shown again." }
        dl {
            dt { "Endpoint" } dd { code { (url) } }
            dt { "Secret" } dd { code.wrap { (secret) } " " button type="button" class="secondary" data-copy=(secret) hidden { "Copy" } }
        }
        p { a href="/app/webhooks" { "Back to the webhooks" } }
    };
    layout::page(signed, "/app/webhooks", TITLE, body)
}

#[derive(Deserialize)]
pub struct EnabledForm {
    #[serde(default)]
    enabled: String,
}

pub async fn enabled(
    Posted(signed, form): Posted<EnabledForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let patch = WebhookPatch {
        enabled: Some(form.enabled == "true"),
        ..WebhookPatch::default()
    };
    state
        .engine
        .webhooks()
        .update(signed.project, webhook_id(&id)?, patch)
        .await?;
    Ok(super::see_other("/app/webhooks"))
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn delete(
    Posted(signed, _): Posted<Empty>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    state
        .engine
        .webhooks()
        .delete(signed.project, webhook_id(&id)?)
        .await?;
    Ok(super::see_other("/app/webhooks"))
}

pub async fn test(
    Posted(signed, _): Posted<Empty>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let got = state
        .engine
        .webhooks()
        .test(signed.project, webhook_id(&id)?)
        .await?;
    let body = html! {
        @if got.delivered {
            p.ok role="status" { "The test event was delivered (" (got.status_code.unwrap_or(200)) ")." }
        } @else {
            p.error role="alert" {
                "The test event was not delivered: "
                @if let Some(code) = got.status_code { "the endpoint answered " (code) "." }
                @else if let Some(e) = &got.error { (e) "." }
            }
        }
        p { a href="/app/webhooks" { "Back to the webhooks" } }
    };
    Ok(layout::page(&signed, "/app/webhooks", TITLE, body))
}
