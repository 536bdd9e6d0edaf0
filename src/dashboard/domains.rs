//! Sender domains: each with its status and the DNS records to publish (with copy
//! buttons), a check now, and a form to add one.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::domains::DomainName;
use mailroom_actors::model::{DomainId, PageRequest};
use maud::html;
use serde::Deserialize;
use serde_json::json;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::body;
use crate::api::domains::{CreateDomainRequest, DomainView};
use crate::state::AppState;

pub async fn list(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let page = state
        .engine
        .domains()
        .list(signed.project, None, PageRequest::first(100))
        .await?;
    let views: Vec<DomainView> = page
        .items
        .iter()
        .map(|d| DomainView::new(d, state.engine.domains().policy()))
        .collect();
    let body = html! {
        @if views.is_empty() { p { "No sender domains yet." } }
        @for d in &views {
            section.domain aria-labelledby={ "d-" (d.id) } {
                h2 id={ "d-" (d.id) } { (d.domain) " " span.status class=(if d.verified { "ok" } else { "error" }) { (d.status) } }
                p.muted {
                    @if let Some(at) = &d.last_checked_at { "Last checked " (at) ". " }
                    @if let Some(at) = &d.verified_at { "Verified " (at) "." }
                }
                table {
                    caption { "DNS records to publish" }
                    thead { tr { th scope="col" { "Purpose" } th scope="col" { "Type" } th scope="col" { "Name" } th scope="col" { "Value" } th scope="col" { "Found" } } }
                    tbody {
                        @for r in &d.records {
                            tr {
                                td { (r.purpose) }
                                td { (r.kind) }
                                td { code { (r.name) } " " button type="button" class="secondary" data-copy=(r.name) hidden aria-label={ "Copy the name of the " (r.purpose) " record" } { "Copy" } }
                                td { code.wrap { (r.value) } " " button type="button" class="secondary" data-copy=(r.value) hidden aria-label={ "Copy the value of the " (r.purpose) " record" } { "Copy" } }
                                td { @if r.verified { "yes" } @else { "no" } }
                            }
                        }
                    }
                }
                form method="post" action={ "/app/domains/" (d.id) "/verify" } {
                    (csrf(&signed))
                    button type="submit" aria-label={ "Verify " (d.domain) " now" } { "Verify now" }
                }
            }
        }
        h2 { "Add a domain" }
        form #domain-form method="post" action="/app/domains" {
            (csrf(&signed))
            label for="domain" { "Domain" }
            input #domain type="text" name="domain" required placeholder="mail.example.com";
            button type="submit" { "Add" }
        }
    };
    Ok(layout::page(
        &signed,
        "/app/domains",
        "Sender domains",
        body,
    ))
}

#[derive(Deserialize)]
pub struct DomainForm {
    #[serde(default)]
    domain: String,
}

pub async fn create(
    Posted(signed, form): Posted<DomainForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let req: CreateDomainRequest =
        body::parse(json!({"domain": form.domain.trim()}).to_string().as_bytes())?;
    let name: DomainName = req.domain;
    state
        .engine
        .domains()
        .add(signed.project, name)
        .await
        .map_err(crate::api::error::ApiError::from)?;
    Ok(super::see_other("/app/domains"))
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn verify(
    Posted(signed, _): Posted<Empty>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id: DomainId = id.parse().map_err(|_| PageError::NotFound)?;
    state.engine.domains().check_now(signed.project, id).await?;
    Ok(super::see_other("/app/domains"))
}
