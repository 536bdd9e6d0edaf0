//! The admin API (`/admin`), enabled only when `admin.token` is set: the CLI's project
//! commands over HTTP, for use while the server runs.

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use mailroom_actors::model::{ProjectId, Timestamp};
use mailroom_actors::Resource;

use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::api::validate::path_id;
use crate::api::{client_addr, guard};
use crate::state::AppState;

use crate::api::admin::{
    keys_json, project_json, AdvanceClockRequest, ClockView, CreateProjectRequest, KeysView,
    ProjectList, ProjectView,
};
pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = futures_util::future::LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
                return Err(ApiError::MissingAuth);
            };
            let Some(expected) = state.admin_token.clone() else {
                return Err(mailroom_actors::Error::NotFound(Resource::Route).into());
            };
            // Counted by the client a forwarding node vouched for, or the one a trusted
            // proxy names: else five bad tokens sent through one node or proxy would lock
            // every operator out.
            let ip = client_addr::of_request(&req, &state.trusted_proxies);
            // Counted already where the request was routed: answered from that.
            let charged = actix_web::HttpMessage::extensions(&req)
                .get::<guard::Charged>()
                .copied();
            if let Some(guard::Charged(wait)) = charged {
                return Err(match wait {
                    Some(secs) => ApiError::RateLimited {
                        retry_after_secs: secs,
                    },
                    None => ApiError::InvalidApiKey,
                });
            }
            // Charged before the token is looked at: a blocked address gets the same
            // answer for a right token and a wrong one.
            if let Some(secs) = state.guard.blocked_for(ip).await {
                return Err(ApiError::RateLimited {
                    retry_after_secs: secs,
                });
            }
            let given = req
                .headers()
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match given {
                Some(g) if guard::token_matches(&expected, g.trim()) => Ok(Admin),
                given => match state.guard.failed(ip).await {
                    Some(secs) => Err(ApiError::RateLimited {
                        retry_after_secs: secs,
                    }),
                    None if given.is_none() => Err(ApiError::MissingAuth),
                    None => Err(ApiError::InvalidApiKey),
                },
            }
        })
    }
}

#[utoipa::path(post, path = "/admin/projects", tag = "Admin", request_body = CreateProjectRequest,
    responses((status = 201, body = KeysView)), security(("bearer" = [])))]
pub async fn create_project(
    _: Admin,
    Body(req): Body<CreateProjectRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let issued = state.engine.admin().create(req.name.as_str()).await?;
    Ok(HttpResponse::Created().json(KeysView::from(&issued)))
}

#[utoipa::path(get, path = "/admin/projects", tag = "Admin",
    responses((status = 200, body = ProjectList)), security(("bearer" = [])))]
pub async fn list_projects(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let list = state.engine.projects().list()?;
    Ok(HttpResponse::Ok().json(ProjectList {
        projects: list.iter().map(ProjectView::from).collect(),
    }))
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
        "disable" => project_json(&state.engine.admin().set_disabled(id, true).await?),
        "enable" => project_json(&state.engine.admin().set_disabled(id, false).await?),
        "rotate-keys" => keys_json(&state.engine.admin().rotate_keys(id).await?),
        _ => return Err(mailroom_actors::Error::NotFound(Resource::Route).into()),
    };
    Ok(HttpResponse::Ok().json(body))
}

/// POST /admin/projects/{id}/domains/trust `{domain}`: marks the project's domain
/// verified without DNS (adding it if the project lacks it). The operator's call only:
/// tenants verify their domains through DNS.
#[utoipa::path(post, path = "/admin/projects/{id}/domains/trust", tag = "Admin",
    params(("id" = String, Path, description = "The project id")),
    responses((status = 200, body = crate::api::domains::DomainView), (status = 404), (status = 422)),
    security(("bearer" = [])))]
pub async fn trust_domain(
    _: Admin,
    path: web::Path<String>,
    Body(crate::api::domains::CreateDomainRequest { domain: name }): Body<
        crate::api::domains::CreateDomainRequest,
    >,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: ProjectId = path_id(&path, Resource::Project)?;
    let trusted = state.engine.admin().trust_domain(id, name).await?;
    Ok(
        HttpResponse::Ok().json(crate::api::domains::DomainView::new(
            &trusted,
            state.engine.domains().policy(),
        )),
    )
}

/// POST /admin/clock/advance `{ms}`: moves the server's clock forward (only when
/// `clock.adjustable` is set, as in the tests; 404 otherwise), and wakes the dispatcher,
/// the timers and the retention purge so that what the move made due happens now.
pub async fn advance_clock(
    _: Admin,
    Body(AdvanceClockRequest { ms }): Body<AdvanceClockRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(clock) = &state.adjustable_clock else {
        return Err(mailroom_actors::Error::NotFound(Resource::Route).into());
    };
    let max = mailroom_actors::AdjustableClock::MAX_OFFSET_MS;
    let Some(ms) = i64::try_from(ms).ok().filter(|ms| *ms <= max) else {
        return Err(mailroom_actors::Error::field(
            "ms",
            mailroom_actors::FieldCode::InvalidType,
            "Milliseconds to move forward: a whole number from 0 to a century",
        )
        .into());
    };
    let now = clock.advance(ms);
    state.engine.ops().wake();
    Ok(HttpResponse::Ok().json(ClockView {
        now: Timestamp::from(now).to_iso(),
    }))
}
