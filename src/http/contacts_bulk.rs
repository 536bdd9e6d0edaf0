//! Bulk contacts: a CSV import that runs in the background (`contact::import`), its
//! progress, and a CSV export streamed a page at a time.

use std::sync::{Arc, Mutex};

use actix_web::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use mailroom_actors::engine::contacts::{csv_guarded, ContactFilter, Import};
use mailroom_actors::engine::segments::MemberPages;
use mailroom_actors::model::{
    Contact, ImportId, Page, PageRequest, ProjectId, SegmentId, Timestamp,
};
use mailroom_actors::{Error, FieldCode, Resource};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::read_within;
use super::error::ApiError;
use super::validate::{path_id, Query};
use super::AppState;

/// Contacts per page of an export: each page is one blocking read and one chunk sent.
const EXPORT_PAGE: &str = "100";

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectedRow {
    /// The CSV line the row starts on; the header is line 1.
    pub line: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportView {
    pub id: String,
    /// QUEUED, RUNNING, COMPLETED or FAILED.
    pub status: String,
    /// Data rows in the file.
    pub rows: u64,
    pub processed: u64,
    pub created: u64,
    pub updated: u64,
    /// The first 1,000 rejected rows.
    pub rejected: Vec<RejectedRow>,
    /// Rejected rows past those listed.
    pub rejected_unlisted: u64,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub error: Option<String>,
}

impl From<&Import> for ImportView {
    fn from(i: &Import) -> Self {
        let iso = |ms: i64| Timestamp::from(ms).to_iso();
        ImportView {
            id: i.id.to_string(),
            status: i.status.as_str().into(),
            rows: i.rows,
            processed: i.processed,
            created: i.created,
            updated: i.updated,
            rejected: i
                .rejected
                .iter()
                .map(|r| RejectedRow {
                    line: r.line,
                    email: r.email.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
            rejected_unlisted: i.rejected_unlisted,
            created_at: iso(i.created_at),
            finished_at: i.finished_at.map(iso),
            error: i.error.clone(),
        }
    }
}

#[utoipa::path(post, path = "/contacts/import", tag = "Contacts",
    request_body(content = String, content_type = "text/csv",
        description = "A header row with `email` (required), `subscribed`, `data` (a JSON object) and data columns typed by a suffix: `age:number`, `vip:boolean`, `plan:string` (the default)"),
    responses((status = 202, description = "stored; importing in the background", body = ImportView),
              (status = 409, description = "limits.max_running_imports imports are under way"),
              (status = 413, description = "larger than limits.max_import_bytes"),
              (status = 422, description = "not text/csv, or a header without email")),
    security(("bearer" = [])))]
pub async fn import(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let csv = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("text/csv"));
    if !csv {
        return Err(Error::field(
            "Content-Type",
            FieldCode::InvalidEnumValue,
            "An import is sent as text/csv",
        )
        .into());
    }
    let mut payload = payload.into_inner();
    let body = read_within(&req, &mut payload, state.limits.max_import_bytes).await?;
    let import = state
        .engine
        .contacts()
        .import(p.id, body.into(), state.limits.max_running_imports)
        .await?;
    Ok(HttpResponse::Accepted().json(ImportView::from(&import)))
}

#[utoipa::path(get, path = "/contacts/imports/{id}", tag = "Contacts",
    responses((status = 200, body = ImportView), (status = 404)), security(("bearer" = [])))]
pub async fn get_import(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ImportId = path_id(&id, Resource::Import)?;
    let found = state.engine.contacts().get_import(p.id, id)?;
    Ok(HttpResponse::Ok().json(ImportView::from(&found)))
}

#[utoipa::path(get, path = "/contacts/export", tag = "Contacts",
    params(("segmentId" = Option<String>, Query, description = "only this segment's members")),
    responses((status = 200, description = "CSV: email, subscribed, createdAt, data (a JSON object)", content_type = "text/csv", body = String),
              (status = 404, description = "no such segment")),
    security(("bearer" = [])))]
pub async fn export(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    export_of(p.id, req, state).await
}

/// The export of project `p` (the dashboard's export link answers with it too).
pub async fn export_of(
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
