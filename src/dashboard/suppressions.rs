//! The suppression list: the newest entries (by reason), an address added or taken off
//! by hand, and a CSV a tenant brings from another provider, imported in one go.

use actix_web::{web, HttpResponse};
use maud::html;
use serde::Deserialize;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::state::AppState;
use mailroom_actors::engine::suppressions::Reason;
use mailroom_actors::model::{EmailAddress, PageRequest, Timestamp};

const TITLE: &str = "Suppressions";

#[derive(Deserialize)]
pub struct Filter {
    #[serde(default)]
    reason: Option<String>,
}

pub async fn list(
    signed: Signed,
    filter: web::Query<Filter>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let reason = filter.reason.as_deref().and_then(Reason::parse);
    let page = state
        .engine
        .suppressions()
        .list(signed.project, reason, PageRequest::first(100))
        .await?;
    let body = html! {
        p {
            "Addresses here get no mail of any kind: sends answer them as suppressed, campaigns and workflows skip them. "
            "Hard bounces and complaints put addresses here; soft bounces do for a while."
        }
        nav aria-label="Reasons" {
            a href="/app/suppressions" { "All" }
            @for name in Reason::NAMES { " · " a href={ "/app/suppressions?reason=" (name) } { (name) } }
        }
        @if page.items.is_empty() {
            p.muted #suppressions-empty { "No address is suppressed." }
        } @else {
            table #suppressions {
                caption { (page.total) " suppressed" @if let Some(r) = reason { " (" (r.as_str()) ")" } }
                thead { tr { th scope="col" { "Address" } th scope="col" { "Reason" } th scope="col" { "Since" } th scope="col" { "Until" } th scope="col" { "" } } }
                tbody {
                    @for s in &page.items {
                        tr {
                            td { @if let Some(e) = &s.email { (e) } @else { span.muted title=(s.hash_hex()) { "(erased contact)" } } }
                            td { (s.reason.as_str()) }
                            td { (Timestamp::from(s.created_at).to_iso()) }
                            td { @if let Some(at) = s.expires_at { (Timestamp::from(at).to_iso()) } }
                            td {
                                @if let Some(e) = &s.email {
                                    form method="post" action="/app/suppressions/remove" {
                                        (csrf(&signed))
                                        input type="hidden" name="email" value=(e);
                                        button type="submit" class="secondary" aria-label={ "Take " (e) " off the list" } { "Remove" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Add an address" }
        form #suppression-form method="post" action="/app/suppressions" {
            (csrf(&signed))
            label for="email" { "Address" }
            input #email type="email" name="email" required;
            button type="submit" { "Suppress" }
        }
        h2 { "Import a list" }
        form #suppression-import method="post" action="/app/suppressions/import" {
            (csrf(&signed))
            label for="csv" { "CSV with a header row: an email column, and a reason column if you have one" }
            textarea #csv name="csv" rows="8" required placeholder="email,reason\nold@example.com,hard_bounce" {}
            button type="submit" { "Import" }
        }
    };
    Ok(layout::page(&signed, "/app/suppressions", TITLE, body))
}

#[derive(Deserialize)]
pub struct AddressForm {
    #[serde(default)]
    email: String,
}

pub async fn add(
    Posted(signed, form): Posted<AddressForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let email = EmailAddress::parse(form.email.trim()).map_err(|_| PageError::BadForm)?;
    state
        .engine
        .suppressions()
        .add(signed.project, email, Reason::Manual)
        .await?;
    Ok(super::see_other("/app/suppressions"))
}

pub async fn remove(
    Posted(signed, form): Posted<AddressForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    state
        .engine
        .suppressions()
        .remove(signed.project, form.email)
        .await?;
    Ok(super::see_other("/app/suppressions"))
}

#[derive(Deserialize)]
pub struct ImportForm {
    #[serde(default)]
    csv: String,
}

pub async fn import(
    Posted(signed, form): Posted<ImportForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let done = state
        .engine
        .suppressions()
        .import(signed.project, form.csv)
        .await?;
    let body = html! {
        p.ok role="status" #import-result {
            (done.added) " added, " (done.existing) " on the list already, " (done.invalid.len()) " not addresses."
        }
        @if !done.invalid.is_empty() {
            table {
                caption { "Rows left out" }
                thead { tr { th scope="col" { "Row" } th scope="col" { "Why" } } }
                tbody { @for (row, why) in done.invalid.iter().take(100) { tr { td { (row) } td { (why) } } } }
            }
        }
        p { a href="/app/suppressions" { "Back to the list" } }
    };
    Ok(layout::page(&signed, "/app/suppressions", TITLE, body))
}
