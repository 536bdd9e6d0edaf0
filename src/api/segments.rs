//! The typed requests and views of the segments endpoints (handled in
//! `http/segments.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::engine::segments::{
    slug, CreateSegment, FilterDocument, Group, Segment, SegmentKind,
};
use mailroom_actors::error::field_de_error;
use mailroom_actors::model::EmailAddress;
use mailroom_actors::{Error, FieldCode, FieldError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiError;
use crate::api::validate::reject_any;
use crate::api::wire::{List, Text};

pub const MAX_NAME_LEN: usize = 100;
pub const MAX_DESCRIPTION_LEN: usize = 1000;
/// Emails per members call (API.md section 8).
pub const MAX_MEMBER_EMAILS: usize = 1000;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SegmentView {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    /// DYNAMIC or STATIC.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The filter of a DYNAMIC segment; null for a STATIC one.
    #[schema(value_type = Option<Object>)]
    pub filters: Option<Value>,
    pub track_membership: bool,
    pub member_count: u64,
    pub created_at: String,
    pub updated_at: String,
}

impl SegmentView {
    pub fn new(s: &Segment, member_count: u64) -> Self {
        SegmentView {
            id: s.id.to_string(),
            name: s.name.clone(),
            description: s.description.clone(),
            kind: s.kind.as_str(),
            filters: s.filters.as_ref().map(Group::to_json),
            track_membership: s.track_membership,
            member_count,
            created_at: s.created_at.to_iso(),
            updated_at: s.updated_at.to_iso(),
        }
    }
}

paged_list!(SegmentList {
    segments: SegmentView
});

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MembersAdded {
    pub added: u64,
    pub not_found: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MembersRemoved {
    pub removed: u64,
    pub not_found: Vec<String>,
}

/// Request body of POST /segments.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSegmentRequest {
    /// It must contain a letter or a digit (the slug of its events).
    pub name: SegmentName,
    pub description: Option<SegmentDescription>,
    /// DYNAMIC (the default) or STATIC.
    #[serde(rename = "type")]
    pub kind: Option<SegmentKind>,
    /// Required for DYNAMIC; none for STATIC.
    pub filters: Option<FilterDocument>,
    /// Record `segment.<slug>.entry` / `.exit` events; default false.
    pub track_membership: Option<bool>,
}

/// Request body of PATCH /segments/{id}: the fields to change.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSegmentRequest {
    pub name: Option<SegmentName>,
    pub description: Option<SegmentDescription>,
    pub filters: Option<FilterDocument>,
    pub track_membership: Option<bool>,
}

/// Request body of POST and DELETE /segments/{id}/members.
#[derive(Deserialize, ToSchema)]
pub struct MembersRequest {
    pub emails: MemberEmails,
}

/// A segment's name: its slug names the segment's events, so it needs a letter or a
/// digit.
#[derive(Debug, Clone)]
pub struct SegmentName(pub String);

impl<'de> Deserialize<'de> for SegmentName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = Text::<MAX_NAME_LEN>::deserialize(d)?.into_string();
        if slug(&name).is_empty() {
            return Err(field_de_error(
                FieldCode::InvalidString,
                "The name must contain a letter or a digit",
            ));
        }
        Ok(SegmentName(name))
    }
}

impl utoipa::PartialSchema for SegmentName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "1 to 100 characters after trimming, a letter or a digit among them",
            ))
            .pattern(Some(r"[^\W_]"))
            .max_length(Some(MAX_NAME_LEN))
            .build()
            .into()
    }
}

type SegmentDescription = Text<MAX_DESCRIPTION_LEN>;
type MemberEmails = List<EmailAddress, 1, MAX_MEMBER_EMAILS>;

/// The filter of a DYNAMIC segment: parsed, validated, and at most `max_bytes` of JSON.
pub fn filters(
    doc: &FilterDocument,
    max_bytes: usize,
    errors: &mut Vec<FieldError>,
) -> Option<Group> {
    doc.parse("filters", max_bytes)
        .map_err(|e| errors.extend(e))
        .ok()
}

/// Answers segments with their member counts.
pub fn views(counted: Vec<(Segment, u64)>) -> Vec<SegmentView> {
    counted
        .iter()
        .map(|(s, n)| SegmentView::new(s, *n))
        .collect()
}

impl CreateSegmentRequest {
    /// The segment to make: a STATIC one takes no filters, a DYNAMIC one needs them,
    /// parsed and at most `max_data_bytes` (the dashboard's form makes one too).
    pub fn into_new(self, max_data_bytes: usize) -> Result<CreateSegment, ApiError> {
        let req = self;
        let mut errors = Vec::new();
        let kind = req.kind.unwrap_or(SegmentKind::Dynamic);
        let filters = match (kind, &req.filters) {
            (SegmentKind::Static, Some(_)) => {
                errors.push(FieldError::new(
                    "filters",
                    FieldCode::Custom,
                    "A STATIC segment takes no filters; add members instead",
                ));
                None
            }
            (SegmentKind::Static, None) => None,
            (SegmentKind::Dynamic, None) => {
                errors.push(FieldError::new(
                    "filters",
                    FieldCode::InvalidType,
                    "Required",
                ));
                None
            }
            (SegmentKind::Dynamic, Some(doc)) => filters(doc, max_data_bytes, &mut errors),
        };
        reject_any(errors)?;
        Ok(CreateSegment {
            name: req.name.0,
            description: req.description.map(Text::into_string),
            kind,
            filters,
            track_membership: req.track_membership.unwrap_or(false),
        })
    }
}

/// The filter of a draft segment (the dashboard's live count): parsed and bounded as a
/// segment's.
pub fn draft_filter(doc: &FilterDocument, max_data_bytes: usize) -> Result<Group, ApiError> {
    let mut errors = Vec::new();
    let filter = filters(doc, max_data_bytes, &mut errors);
    reject_any(errors)?;
    filter.ok_or_else(|| Error::field("filters", FieldCode::InvalidType, "Required").into())
}
impl ToSchema for SegmentName {}
