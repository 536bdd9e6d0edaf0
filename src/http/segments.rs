//! The eight segment endpoints (API.md section 8). Bare records and bare list objects.
//! `memberCount` is computed when the record is read, so it is exact.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::segments::{
    slug, CreateSegment, FilterDocument, Group, Segment, SegmentKind, UpdateSegment,
};
use mailroom_actors::error::field_de_error;
use mailroom_actors::model::{EmailAddress, SegmentId};
use mailroom_actors::{Error, FieldCode, FieldError, Resource};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::contacts::{ContactList, ContactView};
use super::error::ApiError;
use super::validate::{path_id, reject_any, Query};
use super::wire::{List, Text};
use super::AppState;

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

#[derive(Debug, Serialize, ToSchema)]
pub struct SegmentList {
    pub segments: Vec<SegmentView>,
    pub cursor: Option<String>,
    #[serde(rename = "hasMore")]
    pub has_more: bool,
    pub total: u64,
}

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
    name: SegmentName,
    description: Option<SegmentDescription>,
    /// DYNAMIC (the default) or STATIC.
    #[serde(rename = "type")]
    kind: Option<SegmentKind>,
    /// Required for DYNAMIC; none for STATIC.
    filters: Option<FilterDocument>,
    /// Record `segment.<slug>.entry` / `.exit` events; default false.
    track_membership: Option<bool>,
}

/// Request body of PATCH /segments/{id}: the fields to change.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSegmentRequest {
    name: Option<SegmentName>,
    description: Option<SegmentDescription>,
    filters: Option<FilterDocument>,
    track_membership: Option<bool>,
}

/// Request body of POST and DELETE /segments/{id}/members.
#[derive(Deserialize, ToSchema)]
pub struct MembersRequest {
    emails: MemberEmails,
}

/// A segment's name: its slug names the segment's events, so it needs a letter or a
/// digit.
#[derive(Debug, Clone)]
pub struct SegmentName(String);

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

impl ToSchema for SegmentName {}
type SegmentDescription = Text<MAX_DESCRIPTION_LEN>;
type MemberEmails = List<EmailAddress, 1, MAX_MEMBER_EMAILS>;

/// The filter of a DYNAMIC segment: parsed, validated, and at most `max_bytes` of JSON.
fn filters(doc: &FilterDocument, max_bytes: usize, errors: &mut Vec<FieldError>) -> Option<Group> {
    doc.parse("filters", max_bytes)
        .map_err(|e| errors.extend(e))
        .ok()
}

#[utoipa::path(get, path = "/segments", tag = "Segments",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = SegmentList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let page = state.engine.segments().list(p.id, page).await?;
    let has_more = page.has_more();
    let segments = views(state.engine.segments().counted(p.id, page.items).await?);
    Ok(HttpResponse::Ok().json(SegmentList {
        segments,
        cursor: page.next_cursor,
        has_more,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/segments", tag = "Segments", request_body = CreateSegmentRequest,
    responses((status = 201, body = SegmentView), (status = 422)), security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(req): Body<CreateSegmentRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let new = req.into_new(state.limits.max_data_bytes)?;
    let (s, n) = state.engine.segments().create(p.id, new).await?;
    Ok(HttpResponse::Created().json(SegmentView::new(&s, n)))
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

#[utoipa::path(get, path = "/segments/{id}", tag = "Segments",
    responses((status = 200, body = SegmentView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let segment = state.engine.segments().get(p.id, id)?;
    let (s, n) = state.engine.segments().counted_one(p.id, segment).await?;
    Ok(HttpResponse::Ok().json(SegmentView::new(&s, n)))
}

#[utoipa::path(patch, path = "/segments/{id}", tag = "Segments", request_body = UpdateSegmentRequest,
    responses((status = 200, body = SegmentView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(req): Body<UpdateSegmentRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let mut errors = Vec::new();
    let filters = req
        .filters
        .as_ref()
        .and_then(|doc| filters(doc, state.limits.max_data_bytes, &mut errors));
    reject_any(errors)?;
    let msg = UpdateSegment {
        id,
        name: req.name.map(|n| n.0),
        description: req.description.map(|d| Some(d.into_string())),
        filters,
        track_membership: req.track_membership,
    };
    let (s, n) = state.engine.segments().update(p.id, msg).await?;
    Ok(HttpResponse::Ok().json(SegmentView::new(&s, n)))
}

#[utoipa::path(delete, path = "/segments/{id}", tag = "Segments",
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    state.engine.segments().delete(p.id, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/segments/{id}/contacts", tag = "Segments",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = ContactList), (status = 404)), security(("bearer" = [])))]
pub async fn contacts(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let page = state.engine.segments().contacts(p.id, id, page).await?;
    Ok(HttpResponse::Ok().json(ContactList {
        contacts: page.items.iter().map(ContactView::from).collect(),
        has_more: page.has_more(),
        cursor: page.next_cursor,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/segments/{id}/members", tag = "Segments", request_body = MembersRequest,
    responses((status = 200, body = MembersAdded), (status = 404), (status = 409, description = "a DYNAMIC segment")),
    security(("bearer" = [])))]
pub async fn add_members(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(MembersRequest { emails }): Body<MembersRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let emails = emails.0;
    let out = state
        .engine
        .segments()
        .change_members(p.id, id, emails, true)
        .await?;
    Ok(HttpResponse::Ok().json(MembersAdded {
        added: out.changed,
        not_found: out.not_found,
    }))
}

#[utoipa::path(delete, path = "/segments/{id}/members", tag = "Segments", request_body = MembersRequest,
    responses((status = 200, body = MembersRemoved), (status = 404), (status = 409, description = "a DYNAMIC segment")),
    security(("bearer" = [])))]
pub async fn remove_members(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(MembersRequest { emails }): Body<MembersRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let emails = emails.0;
    let out = state
        .engine
        .segments()
        .change_members(p.id, id, emails, false)
        .await?;
    Ok(HttpResponse::Ok().json(MembersRemoved {
        removed: out.changed,
        not_found: out.not_found,
    }))
}
