//! The typed requests and views of the contacts bulk endpoints (handled in
//! `http/contacts_bulk.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::engine::contacts::Import;
use mailroom_actors::model::Timestamp;
use serde::Serialize;
use utoipa::ToSchema;

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
