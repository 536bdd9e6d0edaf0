//! Signing in with a project's secret key or the admin token, the admin's project
//! picker, and signing out. The sign-in form has no session yet, so its CSRF token is a
//! random value in a cookie of its own that the form must repeat (a SameSite=Strict
//! cookie that another site's form cannot send). Wrong keys count against the client
//! address like wrong admin tokens on the API.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::projects::Missing;
use mailroom_actors::model::{ApiKey, KeyKind, ProjectId};
use maud::{html, Markup};
use serde::Deserialize;

use super::auth::{self, AdminSession};
use super::error::PageError;
use super::layout;
use super::session::{self, Principal};
use crate::api::guard;
use crate::state::AppState;

const SIGN_IN_COOKIE: &str = "mailroom_sign_in";

fn sign_in_page(token: &str, error: Option<&str>) -> Markup {
    layout::bare(
        "Sign in",
        html! {
            @if let Some(e) = error { p.error role="alert" { (e) } }
            form method="post" action="/app/sign-in" {
                input type="hidden" name="csrf" value=(token);
                label for="key" { "Secret key (sk_…) or admin token" }
                input #key type="password" name="key" autocomplete="current-password" required autofocus;
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// The sign-in form, with a fresh token in its cookie.
fn form_response(
    req: &HttpRequest,
    status: actix_web::http::StatusCode,
    error: Option<&str>,
) -> HttpResponse {
    let token = session::random_token();
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((
            header::SET_COOKIE,
            auth::set_cookie(req, SIGN_IN_COOKIE, &token, 3600),
        ))
        .body(sign_in_page(&token, error).into_string())
}

pub async fn form(req: HttpRequest) -> HttpResponse {
    form_response(&req, actix_web::http::StatusCode::OK, None)
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    key: String,
}

pub async fn submit(req: HttpRequest, body: web::Bytes) -> Result<HttpResponse, PageError> {
    let state = auth::state(&req)?;
    let (csrf, form): (String, SignInForm) = auth::parse_form(&body)?;
    let expected = auth::cookie(&req, SIGN_IN_COOKIE).unwrap_or_default();
    if expected.is_empty() || !session::csrf_matches(&expected, &csrf) {
        return Err(PageError::Csrf);
    }
    let ip = crate::api::client_addr::of_request(&req, &state.trusted_proxies);
    if state.guard.blocked_for(ip).await.is_some() {
        return Ok(too_many(&req));
    }
    let given = form.key.trim();
    let principal = match principal(&state, given).await? {
        Ok(p) => p,
        Err(refusal) => {
            if state.guard.failed(ip).await.is_some() {
                return Ok(too_many(&req));
            }
            return Ok(form_response(
                &req,
                actix_web::http::StatusCode::UNAUTHORIZED,
                Some(refusal),
            ));
        }
    };
    let to = match principal {
        Principal::Admin { .. } => "/app/projects",
        Principal::Project { .. } => "/app/overview",
    };
    let now = auth::now_ms(&state);
    let Some(id) = state
        .dashboard
        .sessions
        .start(principal, now, state.dashboard.lifetime_ms)
        .await?
    else {
        return Ok(form_response(
            &req,
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            Some("Too many people are signed in right now; try again in a few minutes."),
        ));
    };
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to))
        .append_header((
            header::SET_COOKIE,
            auth::set_cookie(
                &req,
                session::COOKIE,
                &id,
                state.dashboard.lifetime_ms / 1000,
            ),
        ))
        .append_header((
            header::SET_COOKIE,
            auth::set_cookie(&req, SIGN_IN_COOKIE, "", 0),
        ))
        .finish())
}

/// Who the key signs in as, or why it does not.
async fn principal(
    state: &AppState,
    given: &str,
) -> Result<Result<Principal, &'static str>, PageError> {
    const WRONG: &str = "That is neither a project's secret key nor the admin token.";
    if let Some(key) = ApiKey::parse(given) {
        let mut found = state.engine.projects().authenticate(&key)?;
        if found.is_none() {
            // Perhaps made a moment ago on another node, or by the CLI (as the API's
            // routing does, within the same budget of point reads).
            if let Some(cluster) = &state.cluster {
                if cluster.read_through(Missing::ApiKey(key.hash())).await {
                    found = state.engine.projects().authenticate(&key)?;
                }
            }
        }
        let Some(auth) = found else {
            return Ok(Err(WRONG));
        };
        if auth.kind == KeyKind::Public {
            return Ok(Err(
                "A public key (pk_) cannot sign in; use the secret key (sk_).",
            ));
        }
        if auth.project.disabled {
            return Ok(Err("This project is disabled."));
        }
        return Ok(Ok(Principal::Project {
            id: auth.project.id,
            key_hash: auth.project.secret_key_hash,
        }));
    }
    match &state.admin_token {
        Some(token) if guard::token_matches(token, given) => {
            Ok(Ok(Principal::Admin { picked: None }))
        }
        _ => Ok(Err(WRONG)),
    }
}

fn too_many(req: &HttpRequest) -> HttpResponse {
    form_response(
        req,
        actix_web::http::StatusCode::TOO_MANY_REQUESTS,
        Some("Too many wrong keys from this address; wait a minute and try again."),
    )
}

#[derive(Deserialize)]
pub struct Empty {}

/// Ends the session, whether it has a project or not.
pub async fn sign_out(req: HttpRequest, body: web::Bytes) -> Result<HttpResponse, PageError> {
    let state = auth::state(&req)?;
    let (csrf, _): (String, Empty) = auth::parse_form(&body)?;
    if let Some(id) = auth::cookie(&req, session::COOKIE) {
        if let Some(s) = state
            .dashboard
            .sessions
            .get(&id, auth::now_ms(&state))
            .await?
        {
            if !session::csrf_matches(&s.csrf, &csrf) {
                return Err(PageError::Csrf);
            }
            state.dashboard.sessions.end(&id).await?;
        }
    }
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/app/sign-in"))
        .insert_header((
            header::SET_COOKIE,
            auth::set_cookie(&req, session::COOKIE, "", 0),
        ))
        .finish())
}

/// The admin's project picker.
pub async fn projects(
    admin: AdminSession,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let projects = state.engine.projects().list()?;
    let body = html! {
        @if projects.is_empty() {
            p { "There are no projects yet: create one with " code { "mailroom project create" } "." }
        } @else {
            table {
                caption { "Projects" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Id" } th scope="col" { "State" } th scope="col" { span.visually-hidden { "Open" } } } }
                tbody {
                    @for p in &projects {
                        tr {
                            td { (p.name) }
                            td { code { (p.id) } }
                            td { @if p.disabled { "disabled" } @else { "active" } }
                            td {
                                form method="post" action="/app/projects" {
                                    input type="hidden" name="csrf" value=(admin.csrf);
                                    input type="hidden" name="project" value=(p.id);
                                    button type="submit" aria-label={ "Open " (p.name) } { "Open" }
                                }
                            }
                        }
                    }
                }
            }
        }
        form method="post" action="/app/sign-out" {
            input type="hidden" name="csrf" value=(admin.csrf);
            button type="submit" { "Sign out" }
        }
    };
    Ok(layout::html_response(layout::bare("Pick a project", body)))
}

#[derive(Deserialize)]
pub struct PickForm {
    project: String,
}

pub async fn pick(
    req: HttpRequest,
    admin: AdminSession,
    body: web::Bytes,
) -> Result<HttpResponse, PageError> {
    let state = auth::state(&req)?;
    let (csrf, form): (String, PickForm) = auth::parse_form(&body)?;
    if !session::csrf_matches(&admin.csrf, &csrf) {
        return Err(PageError::Csrf);
    }
    let id: ProjectId = form.project.parse().map_err(|_| PageError::BadForm)?;
    // Only a project that exists can be picked.
    state.engine.projects().get(id)?;
    state
        .dashboard
        .sessions
        .set_principal(&admin.session_id, Principal::Admin { picked: Some(id) })
        .await?;
    Ok(super::see_other("/app/overview"))
}
