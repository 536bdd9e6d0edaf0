//! Contacts: the list (search, subscribed filter, pages by cursor), a contact's page
//! (its data, and its events, emails included, as a timeline), edit and delete.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::contacts::{ContactFilter, PatchContact};
use mailroom_actors::engine::events::EventFilter;
use mailroom_actors::model::{ContactId, DataMap, DataPatch, EmailAddress, PageRequest};
use mailroom_actors::{Error, FieldCode};
use maud::html;
use serde::Deserialize;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::validate::data_within;
use crate::state::AppState;

/// Contacts per page of the list.
const PAGE: usize = 50;
/// The longest search, as the API's.
const MAX_SEARCH_LEN: usize = 254;

/// Matches counted at most for a search; past it the page says "more than".
const COUNT_CAP: u64 = 1000;

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    search: String,
    #[serde(default)]
    subscribed: String,
    /// The newest-first cursor of the whole list.
    cursor: Option<String>,
    /// The email after which a search's page starts.
    after: Option<String>,
}

/// One page of the list: the contacts, how many match, and the next page's query.
struct Listed {
    items: Vec<mailroom_actors::model::Contact>,
    count: String,
    next: Option<Vec<(&'static str, String)>>,
}

/// The list reads a page, never the whole project: without a search, newest first with
/// the counters' totals; with one, through the email index by prefix (a substring
/// search would read every contact).
async fn listed(
    state: &AppState,
    p: mailroom_actors::model::ProjectId,
    search: String,
    subscribed: Option<bool>,
    q: &ListQuery,
) -> Result<Listed, PageError> {
    if search.is_empty() {
        let page = PageRequest::parse(Some(&PAGE.to_string()), q.cursor.as_deref())?;
        let filter = ContactFilter {
            subscribed,
            search: None,
        };
        let page = state.engine.contacts().list(p, filter, page).await?;
        let next = page
            .next_cursor
            .map(|c| vec![("subscribed", q.subscribed.clone()), ("cursor", c)]);
        return Ok(Listed {
            items: page.items,
            count: format!("{} contacts", page.total),
            next,
        });
    }
    if let Some(after) = &q.after {
        EmailAddress::parse(after).map_err(|_| PageError::BadForm)?;
    }
    let after = q.after.clone();
    let prefix = search.clone();
    let page = state
        .engine
        .contacts()
        .by_email_prefix(p, prefix, subscribed, after, PAGE, COUNT_CAP)
        .await?;
    let count = if page.more {
        format!("more than {} contacts match", page.matched)
    } else {
        format!("{} contacts match", page.matched)
    };
    let next = page.next_after.map(|a| {
        vec![
            ("search", search),
            ("subscribed", q.subscribed.clone()),
            ("after", a),
        ]
    });
    Ok(Listed {
        items: page.items,
        count,
        next,
    })
}

pub async fn list(
    signed: Signed,
    q: web::Query<ListQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let q = q.into_inner();
    let search = q.search.trim().to_lowercase();
    if search.chars().count() > MAX_SEARCH_LEN {
        return Err(Error::field("search", FieldCode::TooBig, "search is too long").into());
    }
    let subscribed = match q.subscribed.as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    };
    let page = listed(&state, signed.project, search.clone(), subscribed, &q).await?;
    let next = page
        .next
        .map(|pairs| serde_urlencoded::to_string(pairs).unwrap_or_default());
    let body = html! {
        p { a href="/app/contacts/import" { "Import a CSV" } " · " a href="/app/contacts/export" download { "Export all as CSV" } }
        form.row method="get" action="/app/contacts" role="search" {
            div {
                label for="search" { "Email starts with" }
                input #search type="search" name="search" value=(search) maxlength="254";
            }
            div {
                label for="subscribed" { "Subscribed" }
                select #subscribed name="subscribed" {
                    option value="" selected[q.subscribed.is_empty()] { "Any" }
                    option value="yes" selected[q.subscribed == "yes"] { "Subscribed" }
                    option value="no" selected[q.subscribed == "no"] { "Unsubscribed" }
                }
            }
            button type="submit" { "Search" }
        }
        p #contacts-count { (page.count) }
        table {
            caption.visually-hidden { "Contacts" }
            thead { tr { th scope="col" { "Email" } th scope="col" { "Subscribed" } th scope="col" { "Created" } } }
            tbody {
                @for c in &page.items {
                    tr {
                        td { a href={ "/app/contacts/" (c.id) } { (c.email.as_str()) } }
                        td { @if c.subscribed { "yes" } @else { "no" } }
                        td { (c.created_at.to_iso()) }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if q.cursor.is_some() || q.after.is_some() { a href="/app/contacts" { "First page" } }
            @if let Some(next) = next { a rel="next" href={ "/app/contacts?" (next) } { "Next page" } }
        }
    };
    Ok(layout::page(&signed, "/app/contacts", "Contacts", body))
}

fn contact_id(raw: &str) -> Result<ContactId, PageError> {
    raw.parse().map_err(|_| PageError::NotFound)
}

pub async fn show(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = contact_id(&id)?;
    let p = signed.project;
    let contact = state.engine.contacts().get(p, id)?;
    let filter = EventFilter {
        contact: Some(id),
        ..Default::default()
    };
    let events = state
        .engine
        .events()
        .list(p, filter, PageRequest::first(100))
        .await?;
    let data = serde_json::to_string_pretty(&contact.data).unwrap_or_default();
    let body = html! {
        dl {
            dt { "Subscribed" } dd #subscribed { @if contact.subscribed { "yes" } @else { "no" } }
            dt { "Created" } dd { (contact.created_at.to_iso()) }
            dt { "Updated" } dd { (contact.updated_at.to_iso()) }
        }
        h2 { "Edit" }
        form method="post" action={ "/app/contacts/" (contact.id) } {
            (csrf(&signed))
            label {
                input type="checkbox" name="subscribed" value="true" checked[contact.subscribed];
                " Subscribed"
            }
            label for="data" { "Data (a JSON object)" }
            textarea #data name="data" spellcheck="false" { (data) }
            button type="submit" { "Save" }
        }
        h2 { "Timeline" }
        p.muted { (events.total) " events, the latest " (events.items.len()) " below; emails sent, opened and clicked are events too." }
        ol.timeline reversed {
            @for e in &events.items {
                li {
                    time datetime=(e.created_at.to_iso()) { (e.created_at.to_iso()) }
                    " " strong { (e.name) }
                    @if !e.data.is_empty() { pre { (serde_json::Value::Object(e.data.clone())) } }
                }
            }
        }
        h2 { "Delete" }
        form method="post" action={ "/app/contacts/" (contact.id) "/delete" } {
            (csrf(&signed))
            p { "Deleting erases the contact, its events and its emails." }
            button.danger type="submit" { "Delete " (contact.email.as_str()) }
        }
    };
    Ok(layout::page(
        &signed,
        "/app/contacts",
        contact.email.as_str(),
        body,
    ))
}

#[derive(Deserialize)]
pub struct EditForm {
    subscribed: Option<String>,
    #[serde(default)]
    data: String,
}

pub async fn edit(
    Posted(signed, form): Posted<EditForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = contact_id(&id)?;
    let text = form.data.trim();
    let wanted: DataMap = if text.is_empty() {
        DataMap::new()
    } else {
        serde_json::from_str(text).map_err(|_| {
            Error::field("data", FieldCode::InvalidType, "data must be a JSON object")
        })?
    };
    data_within("data", &wanted, state.limits.max_data_bytes)?;
    let current = state.engine.contacts().get(signed.project, id)?;
    // The form holds the whole object; the engine takes a patch, where null removes.
    let mut patch = wanted.clone();
    for key in current.data.keys() {
        if !wanted.contains_key(key) {
            patch.insert(key.clone(), serde_json::Value::Null);
        }
    }
    let msg = PatchContact {
        reason: None,
        campaign: None,
        id,
        subscribed: Some(form.subscribed.is_some()),
        data: DataPatch::new(patch),
    };
    state
        .engine
        .contacts()
        .patch(signed.project, msg)
        .await
        .map_err(crate::api::error::ApiError::from)?;
    Ok(super::see_other(&format!("/app/contacts/{id}")))
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn delete(
    Posted(signed, _): Posted<Empty>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = contact_id(&id)?;
    state
        .engine
        .contacts()
        .delete(signed.project, id)
        .await
        .map_err(crate::api::error::ApiError::from)?;
    Ok(super::see_other("/app/contacts"))
}

pub async fn export(
    signed: Signed,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    Ok(crate::contacts_csv::respond(signed.project, req, state).await?)
}
