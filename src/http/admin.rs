//! The admin API (`/admin`), enabled only when `admin.token` is set: the CLI's project
//! commands over HTTP, for use while the server runs.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use mailroom_actors::model::{ProjectId, Timestamp};
use mailroom_actors::project::messages::{CreateDomain, TrustDomain};
use mailroom_actors::projects::IssuedKeys;
use mailroom_actors::Resource;
use serde_json::json;
use subtle::ConstantTimeEq;

use super::body::JsonBody;
use super::error::ApiError;
use super::validate::{path_id, Fields};
use super::AppState;

pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let expected = req
            .app_data::<web::Data<AppState>>()
            .and_then(|s| s.admin_token.clone());
        let Some(expected) = expected else {
            return ready(Err(mailroom_actors::Error::NotFound(Resource::Route).into()));
        };
        let Some(state) = req.app_data::<web::Data<AppState>>() else {
            return ready(Err(ApiError::MissingAuth));
        };
        let ip = req
            .peer_addr()
            .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
        if let Some(secs) = state.admin_guard.blocked_for(ip) {
            return ready(Err(ApiError::RateLimited {
                retry_after_secs: secs,
            }));
        }
        let given = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        ready(match given {
            Some(g) if bool::from(expected.as_bytes().ct_eq(g.trim().as_bytes())) => Ok(Admin),
            given => match state.admin_guard.failed(ip) {
                Some(secs) => Err(ApiError::RateLimited {
                    retry_after_secs: secs,
                }),
                None if given.is_none() => Err(ApiError::MissingAuth),
                None => Err(ApiError::InvalidApiKey),
            },
        })
    }
}

#[utoipa::path(post, path = "/admin/projects", tag = "Admin",
    responses((status = 201, description = "{id, name, secretKey, publicKey}")), security(("bearer" = [])))]
pub async fn create_project(
    _: Admin,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::of(&body)?;
    let name = f.string("name", mailroom_actors::projects::MAX_NAME_LEN);
    f.finish()?;
    let now = Timestamp::from(state.clock.now());
    let issued = state.projects.create(&name.unwrap_or_default(), now)?;
    state.store.durable().await?;
    Ok(HttpResponse::Created().json(keys_json(&issued)))
}

#[utoipa::path(get, path = "/admin/projects", tag = "Admin",
    responses((status = 200, description = "{projects: [...]}")), security(("bearer" = [])))]
pub async fn list_projects(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let list = state.projects.list()?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "projects": list.iter().map(project_json).collect::<Vec<_>>(),
    })))
}

/// POST /admin/projects/{id}/{action}: disable, enable or rotate-keys.
pub async fn project_action(
    _: Admin,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (id, action) = path.into_inner();
    let id: ProjectId = path_id(&id, Resource::Project)?;
    let body = match action.as_str() {
        "disable" => project_json(&state.projects.set_disabled(id, true)?),
        "enable" => project_json(&state.projects.set_disabled(id, false)?),
        "rotate-keys" => keys_json(&state.projects.rotate_keys(id)?),
        _ => return Err(mailroom_actors::Error::NotFound(Resource::Route).into()),
    };
    state.store.durable().await?;
    Ok(HttpResponse::Ok().json(body))
}

/// POST /admin/projects/{id}/domains/trust `{domain}`: marks the project's domain
/// verified without DNS (adding it if the project lacks it). The operator's call only:
/// tenants verify their domains through DNS.
#[utoipa::path(post, path = "/admin/projects/{id}/domains/trust", tag = "Admin",
    params(("id" = String, Path, description = "The project id")),
    responses((status = 200, body = super::domains::DomainView), (status = 404), (status = 422)),
    security(("bearer" = [])))]
pub async fn trust_domain(
    _: Admin,
    path: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ProjectId = path_id(&path, Resource::Project)?;
    state.projects.get(id)?;
    let mut f = Fields::of(&body)?;
    let raw = f.string("domain", 253);
    f.finish()?;
    let name = super::domains::parse_name(raw.as_deref().unwrap_or_default())?;
    let msg = super::blocking(move || CreateDomain::generate(name)).await?;
    let trusted = state.registry.send(id, TrustDomain(msg)).await?;
    Ok(HttpResponse::Ok().json(super::domains::DomainView::new(
        &trusted,
        &state.spf_include,
    )))
}

/// POST /admin/clock/advance `{ms}`: moves the server's clock forward (only when
/// `clock.adjustable` is set, as in the tests; 404 otherwise), and wakes the dispatcher so
/// that what the move made due goes out now.
pub async fn advance_clock(
    _: Admin,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(clock) = &state.adjustable_clock else {
        return Err(mailroom_actors::Error::NotFound(Resource::Route).into());
    };
    let max = mailroom_actors::AdjustableClock::MAX_OFFSET_MS;
    let ms = body
        .get("ms")
        .and_then(serde_json::Value::as_i64)
        .filter(|ms| (0..=max).contains(ms));
    let Some(ms) = ms else {
        return Err(mailroom_actors::Error::field(
            "ms",
            mailroom_actors::FieldCode::InvalidType,
            "Milliseconds to move forward: a whole number from 0 to a century",
        )
        .into());
    };
    let now = clock.advance(ms);
    state.registry.outbox_signal().notify_one();
    state.registry.timers().wake();
    Ok(HttpResponse::Ok().json(serde_json::json!({"now": Timestamp::from(now).to_iso()})))
}

/// The keys of a new or re-keyed project, shown once (the CLI prints the same).
pub fn keys_json(k: &IssuedKeys) -> serde_json::Value {
    json!({
        "id": k.project.id.to_string(),
        "name": k.project.name,
        "secretKey": k.secret_key.expose(),
        "publicKey": k.public_key.expose(),
    })
}

pub fn project_json(p: &mailroom_actors::model::Project) -> serde_json::Value {
    json!({
        "id": p.id.to_string(),
        "name": p.name,
        "disabled": p.disabled,
        "createdAt": Timestamp::from(p.created_at).to_iso(),
    })
}
