//! Events (API.md section 6): `GET /events`, `GET /events/names`, `GET /events/{id}`.
//! Bare records and bare list objects.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::events::EventFilter;
use mailroom_actors::engine::requests::parse_instant;
use mailroom_actors::model::{ContactId, EmailAddress, EventId, Timestamp};
use mailroom_actors::{FieldCode, FieldError, Resource};

use super::auth::SecretKey;
use crate::api::error::ApiError;
use crate::api::validate::{path_id, reject_any, Query};
use crate::api::wire::MAX_EVENT_NAME_LEN;
use crate::state::AppState;

use crate::api::events::{EventList, EventName, EventNames, EventView};
/// One query parameter parsed by `parse`; a failure is noted in `errors`.
fn param<T>(
    q: &Query,
    name: &str,
    errors: &mut Vec<FieldError>,
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Option<T> {
    let raw = q.get(name).filter(|s| !s.is_empty())?;
    let parsed = parse(raw);
    if parsed.is_none() {
        errors.push(FieldError::new(
            name,
            FieldCode::InvalidString,
            format!("Expected {what}"),
        ));
    }
    parsed
}

fn filter(q: &Query) -> Result<EventFilter, ApiError> {
    let mut errors = Vec::new();
    let name = param(
        q,
        "name",
        &mut errors,
        |s| (s.chars().count() <= MAX_EVENT_NAME_LEN).then(|| s.to_owned()),
        "an event name of at most 200 characters",
    );
    let contact = param(
        q,
        "contactId",
        &mut errors,
        |s| s.parse::<ContactId>().ok(),
        "a contact id",
    );
    let email = param(
        q,
        "email",
        &mut errors,
        |s| EmailAddress::parse(s).ok(),
        "an email address",
    );
    let instant = |s: &str| parse_instant(s).map(Timestamp::from);
    let since = param(q, "since", &mut errors, instant, "an ISO 8601 date");
    let until = param(q, "until", &mut errors, instant, "an ISO 8601 date");
    reject_any(errors)?;
    Ok(EventFilter {
        name,
        contact,
        email,
        since,
        until,
    })
}

#[utoipa::path(get, path = "/events", tag = "Events",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query),
           ("name" = Option<String>, Query), ("contactId" = Option<String>, Query), ("email" = Option<String>, Query),
           ("since" = Option<String>, Query, description = "ISO 8601, inclusive"),
           ("until" = Option<String>, Query, description = "ISO 8601, inclusive")),
    responses((status = 200, body = EventList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let filter = filter(&q)?;
    let page = state.engine.events().list(p.id, filter, page).await?;
    let page = page.map(|e| EventView::from(&e));
    Ok(HttpResponse::Ok().json(EventList::from(page)))
}

#[utoipa::path(get, path = "/events/names", tag = "Events",
    responses((status = 200, body = EventNames)), security(("bearer" = [])))]
pub async fn names(
    SecretKey(p): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let names = state.engine.events().names(p.id).await?;
    Ok(HttpResponse::Ok().json(EventNames {
        total: names.len() as u64,
        names: names
            .into_iter()
            .map(|(name, st)| EventName {
                name,
                count: st.count,
                last_seen_at: Timestamp::from(st.last_at).to_iso(),
            })
            .collect(),
    }))
}

#[utoipa::path(get, path = "/events/{id}", tag = "Events",
    responses((status = 200, body = EventView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: EventId = path_id(&id, Resource::Event)?;
    let event = state.engine.events().get(p.id, id)?;
    Ok(HttpResponse::Ok().json(EventView::from(&event)))
}
