//! The typed requests and views of the suppressions endpoints (handled in
//! `http/suppressions.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::engine::suppressions::{Imported, Suppression};
use mailroom_actors::model::{EmailAddress, Timestamp};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One address on the list.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuppressionView {
    /// The address; null once its contact was deleted (then `emailHash` still matches).
    pub email: Option<String>,
    /// SHA-256 (hex) of the address in lower case.
    pub email_hash: String,
    /// hard_bounce, soft_bounce, complaint or manual.
    pub reason: &'static str,
    /// The email whose report put the address here.
    pub email_id: Option<String>,
    pub created_at: String,
    /// When a soft-bounce suppression lifts; null: it stays until removed.
    pub expires_at: Option<String>,
}

impl SuppressionView {
    pub fn new(s: &Suppression) -> Self {
        SuppressionView {
            email: s.email.clone(),
            email_hash: s.hash_hex(),
            reason: s.reason.as_str(),
            email_id: s.email_id.clone(),
            created_at: Timestamp::from(s.created_at).to_iso(),
            expires_at: s.expires_at.map(|at| Timestamp::from(at).to_iso()),
        }
    }
}

paged_list!(SuppressionList {
    suppressions: SuppressionView
});

/// Why an address is on the list (`?reason=` takes one).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SuppressionReason {
    HardBounce,
    SoftBounce,
    Complaint,
    Manual,
}

/// The one reason a tenant gives by hand; the others come from delivery reports.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManualReason {
    Manual,
}

/// Request body of POST /suppressions.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddSuppressionRequest {
    pub email: EmailAddress,
    /// `manual`, the default.
    #[serde(default)]
    #[allow(dead_code)]
    pub reason: Option<ManualReason>,
}

/// What an import made of the file.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportResult {
    pub added: u64,
    /// Addresses on the list already (kept as they were).
    pub existing: u64,
    /// Rows that name no valid address.
    pub invalid: Vec<InvalidRow>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InvalidRow {
    /// The row's number in the file, the header being 1.
    pub row: u64,
    pub error: String,
}

impl From<Imported> for ImportResult {
    fn from(i: Imported) -> Self {
        ImportResult {
            added: i.added,
            existing: i.existing,
            invalid: i
                .invalid
                .into_iter()
                .map(|(row, error)| InvalidRow { row, error })
                .collect(),
        }
    }
}
