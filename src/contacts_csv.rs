//! The contacts' CSV export, streamed a page at a time: `GET /contacts/export` answers
//! with it, and so does the dashboard's export link. The rows come from the engine's
//! contacts door; a formula-like cell is guarded (`csv_guarded`).

use std::sync::{Arc, Mutex};

use actix_web::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use mailroom_actors::engine::contacts::{csv_guarded, ContactFilter};
use mailroom_actors::engine::segments::MemberPages;
use mailroom_actors::model::{Contact, Page, PageRequest, ProjectId, SegmentId};
use mailroom_actors::{Error, Resource};

use crate::api::error::ApiError;
use crate::api::validate::{path_id, Query};
use crate::state::AppState;

/// Contacts per page of an export: each page is one blocking read and one chunk sent.
const EXPORT_PAGE: &str = "100";

/// The CSV of project `p`'s contacts, or of one segment's (`?segmentId=`).
pub async fn respond(
    p: ProjectId,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let source = match q.get("segmentId") {
        None => Source::All,
        Some(raw) => {
            let id: SegmentId = path_id(raw, Resource::Segment)?;
            Source::Segment(Arc::new(Mutex::new(
                state.engine.segments().member_pages(p, id).await?,
            )))
        }
    };
    let state = state.into_inner();
    // The first page is read before answering, so a failure there is still an error status.
    let first = source.page(&state, p, None).await?;
    let head = web::Bytes::from(csv_chunk(true, &first.items)?);
    let start = first.next_cursor.map(|c| (c, source));
    let rest = futures_util::stream::unfold(start, move |next| {
        let state = state.clone();
        async move {
            let (cursor, source) = next?;
            let chunk = match source.page(&state, p, Some(cursor)).await {
                Ok(page) => csv_chunk(false, &page.items).map(|b| (b, page.next_cursor)),
                Err(e) => Err(e),
            };
            Some(match chunk {
                Ok((bytes, cursor)) => (Ok(web::Bytes::from(bytes)), cursor.map(|c| (c, source))),
                // The status line is sent already: the client sees a cut stream.
                Err(e) => {
                    tracing::warn!(error = %e, "contact export stopped");
                    (Err(std::io::Error::other(e.to_string())), None)
                }
            })
        }
    });
    let stream = futures_util::stream::once(async move { Ok(head) }).chain(rest);
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "text/csv; charset=utf-8"))
        .insert_header((CONTENT_DISPOSITION, "attachment; filename=\"contacts.csv\""))
        .streaming(stream))
}

/// Where an export's contacts come from.
enum Source {
    All,
    /// Shared with one blocking read at a time: it holds the filter's statistics.
    Segment(Arc<Mutex<MemberPages>>),
}

impl Source {
    /// One page after `cursor`, read off the async thread.
    async fn page(
        &self,
        state: &AppState,
        p: ProjectId,
        cursor: Option<String>,
    ) -> Result<Page<Contact>, ApiError> {
        let page = PageRequest::parse(Some(EXPORT_PAGE), cursor.as_deref())?;
        let contacts = state.engine.contacts();
        match self {
            Source::All => {
                let all = ContactFilter {
                    subscribed: None,
                    search: None,
                };
                Ok(contacts.list(p, all, page).await?)
            }
            Source::Segment(pages) => Ok(contacts.member_page(pages.clone(), p, page).await?),
        }
    }
}

/// Rows as CSV (with the header row first when `header`); `data` is a JSON object, the
/// column an import reads back.
fn csv_chunk(header: bool, contacts: &[Contact]) -> Result<Vec<u8>, ApiError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let fail = |e: csv::Error| ApiError::Engine(Error::Internal(format!("writing CSV: {e}")));
    if header {
        w.write_record(["email", "subscribed", "createdAt", "data"])
            .map_err(fail)?;
    }
    for c in contacts {
        let data = serde_json::Value::Object(c.data.clone()).to_string();
        let subscribed = if c.subscribed { "true" } else { "false" };
        let email = csv_guarded(c.email.as_str());
        w.write_record([&*email, subscribed, &c.created_at.to_iso(), &data])
            .map_err(fail)?;
    }
    w.into_inner()
        .map_err(|e| ApiError::Engine(Error::Internal(format!("writing CSV: {e}"))))
}
