//! The eight segment endpoints (API.md section 8). Bare records and bare list objects.
//! `memberCount` is computed when the record is read, so it is exact.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::model::{EmailAddress, SegmentId, Timestamp};
use mailroom_actors::project::messages::{
    ChangeMembers, CreateSegment, DeleteSegment, UpdateSegment,
};
use mailroom_actors::project::segment_queries;
use mailroom_actors::segment::{slug, Group, Segment, SegmentKind};
use mailroom_actors::{Error, FieldCode, Resource};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::JsonBody;
use super::contacts::{ContactList, ContactView};
use super::error::ApiError;
use super::validate::{json_type, path_id, Fields, Query};
use super::{blocking, AppState};

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
    fn new(s: &Segment, member_count: u64) -> Self {
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

/// Request body of POST /segments (documentation; parsing is field by field).
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct CreateSegmentRequest {
    name: String,
    description: Option<String>,
    /// DYNAMIC (the default) or STATIC.
    #[schema(rename = "type")]
    kind: Option<String>,
    /// Required for DYNAMIC: `{operator: AND|OR, conditions: [...]}`; none for STATIC.
    #[schema(value_type = Option<Object>)]
    filters: Option<Value>,
    /// Record `segment.<slug>.entry` / `.exit` events; default false.
    track_membership: Option<bool>,
}

/// Request body of PATCH /segments/{id}: the same fields, all optional.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct UpdateSegmentRequest {
    name: Option<String>,
    description: Option<String>,
    #[schema(value_type = Option<Object>)]
    filters: Option<Value>,
    track_membership: Option<bool>,
}

/// Request body of POST and DELETE /segments/{id}/members.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct MembersRequest {
    /// 1 to 1000 addresses.
    emails: Vec<String>,
}

fn now(state: &AppState) -> i64 {
    Timestamp::from(state.clock.now()).millis()
}

/// Answers records with their member counts, computed off the async thread.
async fn with_counts(
    state: &AppState,
    p: mailroom_actors::model::ProjectId,
    segments: Vec<Segment>,
) -> Result<Vec<SegmentView>, ApiError> {
    let store = state.store.clone();
    let table = state.registry.contacts(p);
    let at = now(state);
    blocking(move || {
        let counts = segment_queries::member_counts(&*store, &table, p, &segments, at)?;
        Ok(segments
            .iter()
            .zip(counts)
            .map(|(s, n)| SegmentView::new(s, n))
            .collect())
    })
    .await
}

async fn one(
    state: &AppState,
    p: mailroom_actors::model::ProjectId,
    s: Segment,
) -> Result<SegmentView, ApiError> {
    let mut views = with_counts(state, p, vec![s]).await?;
    views
        .pop()
        .ok_or_else(|| Error::Internal("a counted segment went missing".into()).into())
}

fn name(f: &mut Fields, required: bool) -> Option<String> {
    let name = if required {
        f.string("name", MAX_NAME_LEN)
    } else {
        f.opt_string("name", MAX_NAME_LEN)
    };
    match name {
        Some(n) if slug(&n).is_empty() => {
            f.error(
                "name",
                FieldCode::InvalidString,
                "The name must contain a letter or a digit",
            );
            None
        }
        other => other,
    }
}

/// The filter of a DYNAMIC segment: parsed, validated, and at most `max_bytes` of JSON.
fn filters(f: &mut Fields, body: &Value, max_bytes: usize) -> Option<Group> {
    let v = body.get("filters").filter(|v| !v.is_null())?;
    if serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()) > max_bytes {
        f.error(
            "filters",
            FieldCode::TooBig,
            format!("filters must be at most {max_bytes} bytes of JSON"),
        );
        return None;
    }
    match Group::parse(v, "filters") {
        Ok(g) => Some(g),
        Err(errors) => {
            f.extend(errors);
            None
        }
    }
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
    let store = state.store.clone();
    let page = blocking(move || segment_queries::list_segments(&*store, p.id, &page)).await?;
    let has_more = page.has_more();
    let segments = with_counts(&state, p.id, page.items).await?;
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
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::of(&body)?;
    let name = name(&mut f, true);
    let description = f.opt_string("description", MAX_DESCRIPTION_LEN);
    let kind = match body.get("type").filter(|v| !v.is_null()) {
        None => Some(SegmentKind::Dynamic),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("dynamic") => Some(SegmentKind::Dynamic),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("static") => Some(SegmentKind::Static),
        Some(Value::String(_)) => {
            f.error(
                "type",
                FieldCode::InvalidEnumValue,
                "Expected 'DYNAMIC' | 'STATIC'",
            );
            None
        }
        Some(other) => {
            f.error(
                "type",
                FieldCode::InvalidType,
                format!("Expected string, received {}", json_type(other)),
            );
            None
        }
    };
    let filters = match kind {
        Some(SegmentKind::Static) => {
            if body.get("filters").is_some_and(|v| !v.is_null()) {
                f.error(
                    "filters",
                    FieldCode::Custom,
                    "A STATIC segment takes no filters; add members instead",
                );
            }
            None
        }
        _ => {
            if body.get("filters").is_none_or(Value::is_null) {
                f.error("filters", FieldCode::InvalidType, "Required");
            }
            filters(&mut f, &body, state.limits.max_data_bytes)
        }
    };
    let track_membership = f.opt_bool("trackMembership");
    f.finish()?;
    let (Some(name), Some(kind)) = (name, kind) else {
        return Err(Error::Internal("validated fields went missing".into()).into());
    };
    let msg = CreateSegment {
        name,
        description,
        kind,
        filters,
        track_membership: track_membership.unwrap_or(false),
    };
    let segment = state.registry.send(p.id, msg).await?;
    Ok(HttpResponse::Created().json(one(&state, p.id, segment).await?))
}

#[utoipa::path(get, path = "/segments/{id}", tag = "Segments",
    responses((status = 200, body = SegmentView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let segment = segment_queries::get_segment(&*state.store, p.id, id)?
        .ok_or(Error::NotFound(Resource::Segment))?;
    Ok(HttpResponse::Ok().json(one(&state, p.id, segment).await?))
}

#[utoipa::path(patch, path = "/segments/{id}", tag = "Segments", request_body = UpdateSegmentRequest,
    responses((status = 200, body = SegmentView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let mut f = Fields::of(&body)?;
    let name = name(&mut f, false);
    let description = f.opt_string("description", MAX_DESCRIPTION_LEN);
    let filters = filters(&mut f, &body, state.limits.max_data_bytes);
    let track_membership = f.opt_bool("trackMembership");
    f.finish()?;
    let msg = UpdateSegment {
        id,
        name,
        description: description.map(Some),
        filters,
        track_membership,
    };
    let segment = state.registry.send(p.id, msg).await?;
    Ok(HttpResponse::Ok().json(one(&state, p.id, segment).await?))
}

#[utoipa::path(delete, path = "/segments/{id}", tag = "Segments",
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    state.registry.send(p.id, DeleteSegment { id }).await?;
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
    let store = state.store.clone();
    let table = state.registry.contacts(p.id);
    let at = now(&state);
    let page = blocking(move || {
        let segment = segment_queries::get_segment(&*store, p.id, id)?
            .ok_or(Error::NotFound(Resource::Segment))?;
        segment_queries::segment_contacts(&*store, &table, p.id, &segment, &page, at)
    })
    .await?;
    Ok(HttpResponse::Ok().json(ContactList {
        contacts: page.items.iter().map(ContactView::from).collect(),
        has_more: page.has_more(),
        cursor: page.next_cursor,
        total: page.total,
    }))
}

/// `emails`: 1 to 1000 addresses, each checked.
fn emails(body: &Value) -> Result<Vec<EmailAddress>, ApiError> {
    let mut f = Fields::of(body)?;
    let mut out = Vec::new();
    match body.get("emails").filter(|v| !v.is_null()) {
        None => f.error("emails", FieldCode::InvalidType, "Required"),
        Some(Value::Array(items)) if items.is_empty() => f.error(
            "emails",
            FieldCode::TooSmall,
            "Array must contain at least 1 element(s)",
        ),
        Some(Value::Array(items)) if items.len() > MAX_MEMBER_EMAILS => f.error(
            "emails",
            FieldCode::TooBig,
            format!("Array must contain at most {MAX_MEMBER_EMAILS} element(s)"),
        ),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item.as_str().map(EmailAddress::parse) {
                    Some(Ok(e)) => out.push(e),
                    Some(Err(_)) => f.error(
                        &format!("emails.{i}"),
                        FieldCode::InvalidString,
                        "Invalid email",
                    ),
                    None => f.error(
                        &format!("emails.{i}"),
                        FieldCode::InvalidType,
                        format!("Expected string, received {}", json_type(item)),
                    ),
                }
            }
        }
        Some(other) => f.error(
            "emails",
            FieldCode::InvalidType,
            format!("Expected array, received {}", json_type(other)),
        ),
    }
    f.finish()?;
    Ok(out)
}

#[utoipa::path(post, path = "/segments/{id}/members", tag = "Segments", request_body = MembersRequest,
    responses((status = 200, body = MembersAdded), (status = 404), (status = 409, description = "a DYNAMIC segment")),
    security(("bearer" = [])))]
pub async fn add_members(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let emails = emails(&body)?;
    let out = state
        .registry
        .send(
            p.id,
            ChangeMembers {
                id,
                emails,
                add: true,
            },
        )
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
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: SegmentId = path_id(&id, Resource::Segment)?;
    let emails = emails(&body)?;
    let out = state
        .registry
        .send(
            p.id,
            ChangeMembers {
                id,
                emails,
                add: false,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().json(MembersRemoved {
        removed: out.changed,
        not_found: out.not_found,
    }))
}
