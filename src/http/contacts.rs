//! The five contact endpoints (spec "Contacts", API.md section 3). Bare records and a
//! bare list object, as Plunk returns them.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::contacts::{ContactFilter, Erased, PatchContact, UpsertContact};
use mailroom_actors::model::{Contact, ContactId, DataMap, DataPatch, EmailAddress};
use mailroom_actors::{Error, Resource};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::error::ApiError;
use super::validate::{data_within, path_id, Query};
use super::AppState;

/// The longest `search` string that is worth scanning for.
const MAX_SEARCH_LEN: usize = 254;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactView {
    pub id: String,
    pub email: String,
    pub subscribed: bool,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub created_at: String,
    pub updated_at: String,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<UpsertMeta>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsertMeta {
    pub is_new: bool,
    pub is_update: bool,
}

impl From<&Contact> for ContactView {
    fn from(c: &Contact) -> Self {
        ContactView {
            id: c.id.to_string(),
            email: c.email.to_string(),
            subscribed: c.subscribed,
            data: serde_json::Value::Object(c.data.clone()),
            created_at: c.created_at.to_iso(),
            updated_at: c.updated_at.to_iso(),
            meta: None,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ContactList {
    pub contacts: Vec<ContactView>,
    pub cursor: Option<String>,
    #[serde(rename = "hasMore")]
    pub has_more: bool,
    pub total: u64,
}

/// Request body of POST /contacts.
#[derive(Deserialize, ToSchema)]
pub struct UpsertContactRequest {
    /// Trimmed and lowercased; the upsert key.
    email: EmailAddress,
    /// Default true for a new contact; unchanged on an update when omitted.
    subscribed: Option<bool>,
    /// Merged shallowly; a key set to null is removed.
    #[schema(value_type = Option<Object>)]
    data: Option<DataMap>,
}

/// Request body of PATCH /contacts/{id}.
#[derive(Deserialize, ToSchema)]
pub struct PatchContactRequest {
    subscribed: Option<bool>,
    #[schema(value_type = Option<Object>)]
    data: Option<DataMap>,
}

#[utoipa::path(get, path = "/contacts", tag = "Contacts",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"),
           ("cursor" = Option<String>, Query), ("subscribed" = Option<bool>, Query),
           ("search" = Option<String>, Query, description = "case-insensitive substring of the email")),
    responses((status = 200, body = ContactList)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let search = q
        .get("search")
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned);
    if search
        .as_ref()
        .is_some_and(|s| s.chars().count() > MAX_SEARCH_LEN)
    {
        return Err(Error::field(
            "search",
            mailroom_actors::FieldCode::TooBig,
            "search is too long",
        )
        .into());
    }
    let filter = ContactFilter {
        subscribed: q.opt_bool("subscribed")?,
        search,
    };
    let page = state.engine.contacts().list(p.id, filter, page).await?;
    Ok(HttpResponse::Ok().json(ContactList {
        contacts: page.items.iter().map(ContactView::from).collect(),
        has_more: page.has_more(),
        cursor: page.next_cursor,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/contacts", tag = "Contacts", request_body = UpsertContactRequest,
    responses((status = 201, description = "created", body = ContactView),
              (status = 200, description = "updated", body = ContactView)),
    security(("bearer" = [])))]
pub async fn upsert(
    SecretKey(p): SecretKey,
    Body(body): Body<UpsertContactRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let data = body.data.unwrap_or_default();
    data_within("data", &data, state.limits.max_data_bytes)?;
    let msg = UpsertContact {
        email: body.email,
        subscribed: body.subscribed,
        default_subscribed: true,
        data: DataPatch::new(data),
    };
    let out = state.engine.contacts().upsert(p.id, msg).await?;
    let mut view = ContactView::from(&out.contact);
    view.meta = Some(UpsertMeta {
        is_new: out.is_new,
        is_update: !out.is_new,
    });
    Ok(if out.is_new {
        HttpResponse::Created().json(view)
    } else {
        HttpResponse::Ok().json(view)
    })
}

#[utoipa::path(get, path = "/contacts/{id}", tag = "Contacts",
    responses((status = 200, body = ContactView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ContactId = path_id(&id, Resource::Contact)?;
    let contact = state.engine.contacts().get(p.id, id)?;
    Ok(HttpResponse::Ok().json(ContactView::from(&contact)))
}

#[utoipa::path(patch, path = "/contacts/{id}", tag = "Contacts", request_body = PatchContactRequest,
    responses((status = 200, body = ContactView), (status = 404)), security(("bearer" = [])))]
pub async fn patch(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(body): Body<PatchContactRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ContactId = path_id(&id, Resource::Contact)?;
    let data = body.data.unwrap_or_default();
    data_within("data", &data, state.limits.max_data_bytes)?;
    let msg = PatchContact {
        reason: None,
        campaign: None,
        id,
        subscribed: body.subscribed,
        data: DataPatch::new(data),
    };
    let contact = state.engine.contacts().patch(p.id, msg).await?;
    Ok(HttpResponse::Ok().json(ContactView::from(&contact)))
}

/// A delete whose erasure goes on in the background.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErasureQueued {
    pub id: String,
    /// Always `"queued"`.
    pub erasure: String,
}

#[utoipa::path(delete, path = "/contacts/{id}", tag = "Contacts",
    responses((status = 204, description = "deleted and erased"),
              (status = 202, description = "deleted; the rest of its data is being erased", body = ErasureQueued),
              (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ContactId = path_id(&id, Resource::Contact)?;
    match state.engine.contacts().delete(p.id, id).await? {
        Erased::Done => Ok(HttpResponse::NoContent().finish()),
        Erased::Queued => Ok(HttpResponse::Accepted().json(ErasureQueued {
            id: id.to_string(),
            erasure: "queued".into(),
        })),
    }
}
