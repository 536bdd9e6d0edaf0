//! Authentication extractors. `SecretKey` admits only `sk_` keys; `AnyKey` also admits
//! `pk_` keys (POST /v1/track). Both resolve the project, refuse disabled ones, and
//! take the request from the project's rate-limit budget.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use mailroom_actors::model::{ApiKey, KeyKind, ProjectId};

use crate::api::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Clone, Copy)]
pub struct ProjectCtx {
    pub id: ProjectId,
    pub kind: KeyKind,
}

/// A request made with the project's secret key.
pub struct SecretKey(pub ProjectCtx);

/// A request made with the project's secret or public key.
pub struct AnyKey(pub ProjectCtx);

fn bearer(req: &HttpRequest) -> Result<&str, ApiError> {
    let value = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or(ApiError::MissingAuth)?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(ApiError::MissingAuth)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(ApiError::MissingAuth);
    }
    Ok(token.trim())
}

fn authenticate(req: &HttpRequest, allow_public: bool) -> Result<ProjectCtx, ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| ApiError::Engine(mailroom_actors::Error::Internal("no app state".into())))?;
    let key = ApiKey::parse(bearer(req)?).ok_or(ApiError::InvalidApiKey)?;
    let auth = state
        .engine
        .projects()
        .authenticate(&key)?
        .ok_or(ApiError::InvalidApiKey)?;
    if auth.project.disabled {
        return Err(ApiError::ProjectDisabled);
    }
    if auth.kind == KeyKind::Public && !allow_public {
        return Err(ApiError::Forbidden(
            "A public key (pk_) can only be used with POST /v1/track",
        ));
    }
    // The public key has a budget of its own: it sits in web pages for anyone to copy,
    // and spending it must not stop the project's servers.
    let budget = match auth.kind {
        KeyKind::Public => &state.public_rate_limit,
        KeyKind::Secret => &state.rate_limit,
    };
    if let Some(limit) = budget {
        let (info, verdict) = limit.check(auth.project.id);
        req.extensions_mut().insert(info);
        verdict?;
    }
    Ok(ProjectCtx {
        id: auth.project.id,
        kind: auth.kind,
    })
}

impl FromRequest for SecretKey {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authenticate(req, false).map(SecretKey))
    }
}

impl FromRequest for AnyKey {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authenticate(req, true).map(AnyKey))
    }
}
