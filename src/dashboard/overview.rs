//! The overview: contacts, the project's outbox, emails per day over two weeks (sent,
//! opened, clicked, bounced), and the latest events.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::contacts::ContactFilter;
use mailroom_actors::engine::events::{Event, EventFilter};
use mailroom_actors::model::{PageRequest, ProjectId, Timestamp};
use maud::{html, Markup};

use super::auth::{now_ms, Signed};
use super::chart::{line_chart, Series};
use super::error::PageError;
use super::layout;
use crate::state::AppState;

const DAYS: i64 = 14;
const DAY_MS: i64 = 86_400_000;

/// (event name, label, stylesheet class). A sent email is one the receiving server
/// accepted: the engine has no later delivery signal than that.
const SERIES: &[(&str, &str, &str)] = &[
    ("email.sent", "Sent (delivered)", "s-sent"),
    ("email.open", "Opened", "s-open"),
    ("email.click", "Clicked", "s-click"),
    ("email.bounce", "Bounced", "s-bounce"),
];

struct Overview {
    contacts: u64,
    subscribed: u64,
    outbox: u64,
    days: Vec<String>,
    series: Vec<Vec<u64>>,
    recent: Vec<Event>,
}

async fn load(state: &AppState, p: ProjectId, now: i64) -> Result<Overview, PageError> {
    let contacts = state.engine.contacts();
    let first = || PageRequest::first(1);
    let all = contacts
        .list(p, ContactFilter::default(), first())
        .await?
        .total;
    let subscribed = ContactFilter {
        subscribed: Some(true),
        search: None,
    };
    let subscribed = contacts.list(p, subscribed, first()).await?.total;
    let today = now - now.rem_euclid(DAY_MS);
    let starts: Vec<i64> = (0..DAYS).rev().map(|d| today - d * DAY_MS).collect();
    let days = starts
        .iter()
        .map(|s| Timestamp::from(*s).to_iso()[..10].to_owned())
        .collect();
    let names = SERIES.iter().map(|(n, _, _)| (*n).to_owned()).collect();
    let series = state
        .engine
        .events()
        .daily_counts(p, names, starts, DAY_MS)
        .await?;
    let events = state.engine.events();
    let recent = events
        .list(p, EventFilter::default(), PageRequest::first(10))
        .await?;
    Ok(Overview {
        contacts: all,
        subscribed,
        outbox: state.engine.emails().outbox_depth(p).await?,
        days,
        series,
        recent: recent.items,
    })
}

pub async fn page(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let (p, now) = (signed.project, now_ms(&state));
    let o = load(&state, p, now).await?;
    let rates = state.engine.suppressions().stats(p).await?;
    let percent = |r: f64| format!("{:.2}%", r * 100.0);
    let series: Vec<Series> = SERIES
        .iter()
        .zip(o.series)
        .map(|((_, label, class), values)| Series {
            label,
            class,
            values,
        })
        .collect();
    let body = html! {
        section aria-labelledby="numbers" {
            h2 #numbers { "Now" }
            dl.stats {
                div { dt { "Contacts" } dd #contacts-total { (o.contacts) } }
                div { dt { "Subscribed" } dd { (o.subscribed) } }
                div { dt { "Emails waiting in the outbox" } dd #outbox-depth { (o.outbox) } }
                div { dt { "Bounce rate (recent emails)" } dd #bounce-rate { (percent(rates.bounce_rate)) } }
                div { dt { "Complaint rate (recent emails)" } dd #complaint-rate { (percent(rates.complaint_rate)) } }
                div { dt { "Suppressed addresses" } dd #suppressed { a href="/app/suppressions" { (rates.suppressed) } } }
            }
        }
        section aria-labelledby="emails" {
            h2 #emails { "Emails per day" }
            (line_chart("Emails per day, last 14 days (UTC)", &o.days, &series))
        }
        section aria-labelledby="recent" {
            h2 #recent { "Recent events" }
            (events_table(&o.recent))
        }
    };
    Ok(layout::page(&signed, "/app/overview", "Overview", body))
}

/// Events as a table: time, name, contact.
pub fn events_table(events: &[Event]) -> Markup {
    html! {
        @if events.is_empty() {
            p { "No events yet." }
        } @else {
            table {
                thead { tr { th scope="col" { "When" } th scope="col" { "Event" } th scope="col" { "Contact" } } }
                tbody {
                    @for e in events {
                        tr {
                            td { time datetime=(e.created_at.to_iso()) { (e.created_at.to_iso()) } }
                            td { (e.name) }
                            td { a href={ "/app/contacts/" (e.contact_id) } { (e.email) } }
                        }
                    }
                }
            }
        }
    }
}
