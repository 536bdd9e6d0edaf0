//! The session extractors. `Signed` is a request of a signed-in session that has a
//! project (a secret-key session, or an admin session that picked one); `Posted<T>` is
//! a form of such a session whose CSRF token matched, with its fields as `T`.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use mailroom_actors::model::{ProjectId, Timestamp};
use serde::de::DeserializeOwned;

use super::error::PageError;
use super::session::{self, Principal, Session};
use crate::state::AppState;

/// A signed-in session with its project.
#[derive(Debug, Clone)]
pub struct Signed {
    pub project: ProjectId,
    pub project_name: String,
    pub admin: bool,
    pub csrf: String,
    pub session_id: String,
}

/// An admin session, picked a project or not (the project picker).
pub struct AdminSession {
    pub csrf: String,
    pub session_id: String,
}

pub fn state(req: &HttpRequest) -> Result<web::Data<AppState>, PageError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or(PageError::Internal("no app state"))
}

pub fn now_ms(state: &AppState) -> i64 {
    Timestamp::from(state.engine.clock().now()).millis()
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The session behind the request's cookie, with its id.
async fn session(req: &HttpRequest, state: &AppState) -> Result<(String, Session), PageError> {
    let id = cookie(req, session::COOKIE).ok_or(PageError::SignIn)?;
    let session = state
        .dashboard
        .sessions
        .get(&id, now_ms(state))
        .await?
        .ok_or(PageError::SignIn)?;
    Ok((id, session))
}

async fn signed(req: HttpRequest) -> Result<Signed, PageError> {
    let state = state(&req)?;
    let (id, s) = session(&req, &state).await?;
    let (project_id, admin) = match s.principal {
        Principal::Project { id, .. } => (id, false),
        Principal::Admin { picked: Some(p) } => (p, true),
        Principal::Admin { picked: None } => return Err(PageError::PickProject),
    };
    let project = match state.engine.projects().get(project_id) {
        Ok(p) => p,
        Err(mailroom_actors::Error::NotFound(_)) => return Err(PageError::SignIn),
        Err(e) => return Err(PageError::from(e)),
    };
    // A rotated secret key ends the sessions it opened; a disabled project ends them all.
    let key_still_valid = match s.principal {
        Principal::Project { key_hash, .. } => key_hash == project.secret_key_hash,
        Principal::Admin { .. } => state.admin_token.is_some(),
    };
    if !key_still_valid || (project.disabled && !admin) {
        state.dashboard.sessions.end(&id).await?;
        return Err(PageError::SignIn);
    }
    // The project's API budget: a page reaches the same engine work (test sends, filter
    // counts, renders) as the API, so it is charged the same.
    if let Some(limit) = &state.rate_limit {
        let (_, verdict) = limit.check(project.id);
        verdict?;
    }
    Ok(Signed {
        project: project.id,
        project_name: project.name,
        admin,
        csrf: s.csrf,
        session_id: id,
    })
}

impl FromRequest for Signed {
    type Error = PageError;
    type Future = Boxed<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        Box::pin(signed(req.clone()))
    }
}

impl FromRequest for AdminSession {
    type Error = PageError;
    type Future = Boxed<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state(&req)?;
            let (id, s) = session(&req, &state).await?;
            match s.principal {
                Principal::Admin { .. } if state.admin_token.is_some() => Ok(AdminSession {
                    csrf: s.csrf,
                    session_id: id,
                }),
                _ => Err(PageError::NotFound),
            }
        })
    }
}

/// A form posted by a signed-in session, its CSRF token checked.
pub struct Posted<T>(pub Signed, pub T);

/// The `csrf` field of a form body, and the form itself.
pub fn parse_form<T: DeserializeOwned>(body: &[u8]) -> Result<(String, T), PageError> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|_| PageError::BadForm)?;
    let csrf = pairs
        .into_iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v)
        .unwrap_or_default();
    let form = serde_urlencoded::from_bytes(body).map_err(|_| PageError::BadForm)?;
    Ok((csrf, form))
}

type Boxed<T> = Pin<Box<dyn Future<Output = Result<T, PageError>>>>;

impl<T: DeserializeOwned + 'static> FromRequest for Posted<T> {
    type Error = PageError;
    type Future = Boxed<Self>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let signed = signed(req.clone());
        let limit = state(req).map_or(0, |s| s.limits.max_body_bytes);
        let body = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            let signed = signed.await?;
            let body = body.await.map_err(|_| PageError::BadForm)?;
            if body.len() > limit {
                return Err(PageError::BadForm);
            }
            let (csrf, form) = parse_form(&body)?;
            if !session::csrf_matches(&signed.csrf, &csrf) {
                return Err(PageError::Csrf);
            }
            Ok(Posted(signed, form))
        })
    }
}

/// A `Set-Cookie` value for a dashboard cookie: script cannot read it, no other site's
/// request carries it, and over https (or when config says so) only https does.
pub fn set_cookie(req: &HttpRequest, name: &str, value: &str, max_age_secs: i64) -> String {
    let secure = state(req).is_ok_and(|s| s.dashboard.secure_cookie)
        || req.connection_info().scheme() == "https";
    format!(
        "{name}={value}; HttpOnly; SameSite=Strict; Path=/app; Max-Age={max_age_secs}{}",
        if secure { "; Secure" } else { "" }
    )
}
