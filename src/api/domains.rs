//! The typed requests and views of the domains endpoints (handled in
//! `http/domains.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::engine::domains::{Domain, DomainName, RecordPolicy};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainView {
    pub id: String,
    /// The ASCII form (IDN names are stored as punycode).
    pub domain: String,
    /// PENDING, VERIFIED or FAILED.
    pub status: &'static str,
    pub verified: bool,
    pub records: Vec<RecordView>,
    pub created_at: String,
    /// When the domain became VERIFIED; null while it is not.
    pub verified_at: Option<String>,
    /// The last DNS check, by request or by the background re-check.
    pub last_checked_at: Option<String>,
    /// Marked verified by the operator without DNS (`mailroom domain trust`); stays
    /// VERIFIED whatever the checks find.
    pub trusted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecordView {
    /// TXT, or CNAME for the return-path host.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub value: String,
    /// OWNERSHIP, DKIM, SPF, DMARC, or RETURN_PATH (only when the server has
    /// `feedback.return_path_domain`). SPF, DMARC and RETURN_PATH are advice and do not
    /// decide the status; a verified RETURN_PATH moves the envelope sender under it.
    pub purpose: &'static str,
    pub verified: bool,
}

impl DomainView {
    pub fn new(d: &Domain, policy: &RecordPolicy) -> Self {
        DomainView {
            id: d.id.to_string(),
            domain: d.name.to_string(),
            status: d.status.as_str(),
            verified: d.is_verified(),
            records: d
                .records(policy)
                .into_iter()
                .map(|r| RecordView {
                    kind: r.kind,
                    name: r.name,
                    value: r.value,
                    purpose: r.purpose.as_str(),
                    verified: r.verified,
                })
                .collect(),
            created_at: d.created_at.to_iso(),
            verified_at: d.verified_at.map(|t| t.to_iso()),
            last_checked_at: d.checked_at.map(|t| t.to_iso()),
            trusted: d.trusted,
        }
    }
}

paged_list!(DomainList {
    domains: DomainView
});

/// Request body of POST /domains.
#[derive(Deserialize, ToSchema)]
pub struct CreateDomainRequest {
    pub domain: DomainName,
}
