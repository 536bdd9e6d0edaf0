//! The five contact endpoints (spec "Contacts", API.md section 3). Bare records and a
//! bare list object, as Plunk returns them.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::contacts::{ContactFilter, Erased, PatchContact, UpsertContact};
use mailroom_actors::model::{ContactId, DataPatch};
use mailroom_actors::{Error, Resource};

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::api::validate::{data_within, path_id, Query};
use crate::state::AppState;

use crate::api::contacts::{
    ContactList, ContactView, ErasureQueued, PatchContactRequest, UpsertContactRequest, UpsertMeta,
};
/// The longest `search` string that is worth scanning for.
const MAX_SEARCH_LEN: usize = 254;

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
    let page = page.map(|c| ContactView::from(&c));
    Ok(HttpResponse::Ok().json(ContactList::from(page)))
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
