//! What a page answers when it cannot show what was asked: a redirect to sign in, or
//! an HTML page with the status and message of the API's one error table.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use maud::html;

use crate::api::error::ApiError;

#[derive(Debug)]
pub enum PageError {
    /// No session, or one that ended: to the sign-in page.
    SignIn,
    /// An admin session without a project: to the picker.
    PickProject,
    /// A form without the session's CSRF token.
    Csrf,
    /// A body that is not a form of the expected fields.
    BadForm,
    NotFound,
    Api(ApiError),
    Internal(&'static str),
}

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> Self {
        PageError::Api(e)
    }
}

impl From<mailroom_actors::Error> for PageError {
    fn from(e: mailroom_actors::Error) -> Self {
        PageError::Api(e.into())
    }
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::SignIn => f.write_str("Sign in to continue."),
            PageError::PickProject => f.write_str("Pick a project to continue."),
            PageError::Csrf => f.write_str(
                "This form did not come from this session (or the session has ended). \
                 Reload the page and try again.",
            ),
            PageError::BadForm => f.write_str("The form was not filled in as expected."),
            PageError::NotFound => f.write_str("There is no such page."),
            PageError::Api(e) => write!(f, "{e}"),
            PageError::Internal(what) => write!(f, "Something went wrong: {what}."),
        }
    }
}

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        match self {
            PageError::SignIn | PageError::PickProject => StatusCode::SEE_OTHER,
            PageError::Csrf => StatusCode::FORBIDDEN,
            PageError::BadForm => StatusCode::UNPROCESSABLE_ENTITY,
            PageError::NotFound => StatusCode::NOT_FOUND,
            PageError::Api(e) => e.status_code(),
            PageError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let to = match self {
            PageError::SignIn => Some("/app/sign-in"),
            PageError::PickProject => Some("/app/projects"),
            _ => None,
        };
        if let Some(to) = to {
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, to))
                .finish();
        }
        if let PageError::Api(e) = self {
            if e.status_code().is_server_error() {
                // The API's table logs what it hides from the caller.
                let _ = e.error_response();
            }
        }
        let status = self.status_code();
        let fields = match self {
            PageError::Api(ApiError::Engine(mailroom_actors::Error::Validation(f))) => f.clone(),
            _ => Vec::new(),
        };
        let body = html! {
            p role="alert" { (self.to_string()) }
            @if !fields.is_empty() {
                ul.error {
                    @for f in &fields { li { code { (f.field) } ": " (f.message) " (" (f.code.as_str()) ")" } }
                }
                p { "Go back, correct the form and send it again." }
            }
            p { a href="/app/overview" { "Back to the overview" } }
        };
        let title = status.canonical_reason().unwrap_or("Error");
        HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .body(super::layout::bare(title, body).into_string())
    }
}
