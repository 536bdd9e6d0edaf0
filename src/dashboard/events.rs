//! Events, newest first, filtered by name, paged by cursor.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::events::EventFilter;
use mailroom_actors::model::PageRequest;
use mailroom_actors::{Error, FieldCode};
use maud::html;
use serde::Deserialize;

use super::auth::Signed;
use super::error::PageError;
use super::layout;
use super::overview::events_table;
use crate::api::wire::MAX_EVENT_NAME_LEN;
use crate::state::AppState;

const PAGE: &str = "50";

#[derive(Deserialize)]
pub struct EventsQuery {
    #[serde(default)]
    name: String,
    cursor: Option<String>,
}

pub async fn list(
    signed: Signed,
    q: web::Query<EventsQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let q = q.into_inner();
    let name = q.name.trim().to_owned();
    if name.chars().count() > MAX_EVENT_NAME_LEN {
        return Err(Error::field(
            "name",
            FieldCode::TooBig,
            "An event name has at most 200 characters",
        )
        .into());
    }
    let page = PageRequest::parse(Some(PAGE), q.cursor.as_deref())?;
    let p = signed.project;
    let filter = EventFilter {
        name: (!name.is_empty()).then(|| name.clone()),
        ..Default::default()
    };
    let events = state.engine.events().list(p, filter, page).await?;
    let names = state.engine.events().names(p).await?;
    let next = events.next_cursor.as_ref().map(|c| {
        serde_urlencoded::to_string([("name", name.as_str()), ("cursor", c.as_str())])
            .unwrap_or_default()
    });
    let body = html! {
        form.row method="get" action="/app/events" role="search" {
            div {
                label for="name" { "Event name" }
                input #name type="search" name="name" value=(name) list="event-names" maxlength="200";
                datalist #event-names { @for (n, _) in &names { option value=(n) {} } }
            }
            button type="submit" { "Filter" }
        }
        p #events-count { (events.total) " events" @if !name.is_empty() { " named " code { (name) } } }
        (events_table(&events.items))
        nav.pager aria-label="Pages" {
            @if q.cursor.is_some() { a href="/app/events" { "First page" } }
            @if let Some(next) = next { a rel="next" href={ "/app/events?" (next) } { "Next page" } }
        }
        h2 { "Names" }
        table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Count" } th scope="col" { "Last seen" } } }
            tbody {
                @for (n, s) in &names {
                    tr { td { a href={ "/app/events?" (serde_urlencoded::to_string([("name", n.as_str())]).unwrap_or_default()) } { (n) } } td { (s.count) } td { (mailroom_actors::model::Timestamp::from(s.last_at).to_iso()) } }
                }
            }
        }
    };
    Ok(layout::page(&signed, "/app/events", "Events", body))
}
