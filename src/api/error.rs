//! The one error table: every error kind maps to exactly one status and one code, and
//! every error body is built here, in the form API.md section 1 gives.

use actix_web::http::header::{HeaderValue, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use mailroom_actors::model::Timestamp;
use mailroom_actors::{Error, Resource};
use serde::Serialize;
use utoipa::ToSchema;

use super::request_id;

#[derive(Debug)]
pub enum ApiError {
    BadRequest(String),
    MissingAuth,
    InvalidApiKey,
    /// A provider callback whose signature (or basic auth) does not verify.
    BadSignature,
    Forbidden(&'static str),
    ProjectDisabled,
    MethodNotAllowed,
    PayloadTooLarge {
        limit: usize,
    },
    RateLimited {
        retry_after_secs: u64,
    },
    Engine(Error),
    /// A forwarded request reached the owner but no answer came in time: the owner may
    /// have acted on it, so no Retry-After invites a blind retry.
    ForwardTimeout,
    /// Any of the above, with a more specific `suggestion` than the table's.
    Suggested(Box<ApiError>, String),
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::Engine(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

fn not_found_code(r: Resource) -> &'static str {
    match r {
        Resource::Contact => "CONTACT_NOT_FOUND",
        Resource::Template => "TEMPLATE_NOT_FOUND",
        Resource::Campaign => "CAMPAIGN_NOT_FOUND",
        Resource::Segment => "SEGMENT_NOT_FOUND",
        Resource::Workflow => "WORKFLOW_NOT_FOUND",
        Resource::Domain => "DOMAIN_NOT_FOUND",
        Resource::Webhook => "WEBHOOK_NOT_FOUND",
        Resource::Suppression => "SUPPRESSION_NOT_FOUND",
        Resource::Email
        | Resource::Event
        | Resource::Execution
        | Resource::Import
        | Resource::Project
        | Resource::Route => "RESOURCE_NOT_FOUND",
    }
}

impl ApiError {
    pub fn with_suggestion(self, suggestion: impl Into<String>) -> ApiError {
        ApiError::Suggested(Box::new(self), suggestion.into())
    }

    fn base(&self) -> &ApiError {
        match self {
            ApiError::Suggested(inner, _) => inner.base(),
            other => other,
        }
    }

    /// The table.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self.base() {
            ApiError::Suggested(inner, _) => inner.status_and_code(),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "BAD_REQUEST"),
            ApiError::MissingAuth => (StatusCode::UNAUTHORIZED, "MISSING_AUTH"),
            ApiError::InvalidApiKey => (StatusCode::UNAUTHORIZED, "INVALID_API_KEY"),
            ApiError::BadSignature => (StatusCode::UNAUTHORIZED, "INVALID_SIGNATURE"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            ApiError::ProjectDisabled => (StatusCode::FORBIDDEN, "PROJECT_DISABLED"),
            ApiError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED"),
            ApiError::PayloadTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
            }
            ApiError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED"),
            ApiError::ForwardTimeout => (StatusCode::GATEWAY_TIMEOUT, "FORWARD_TIMEOUT"),
            ApiError::Engine(e) => match e {
                Error::Validation(_) => (StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
                Error::NotFound(r) => (StatusCode::NOT_FOUND, not_found_code(*r)),
                Error::Conflict { .. } => (StatusCode::CONFLICT, "CONFLICT"),
                Error::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
                Error::NotOwner { .. } => (StatusCode::SERVICE_UNAVAILABLE, "NOT_OWNER"),
                e if e.is_disk_full() => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
                e if e.is_unavailable() => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
                Error::Locked { .. } | Error::Storage(_) | Error::Internal(_) => {
                    (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_SERVER_ERROR")
                }
            },
        }
    }

    fn message(&self) -> String {
        match self.base() {
            ApiError::Suggested(inner, _) => inner.message(),
            ApiError::BadRequest(m) => m.clone(),
            ApiError::MissingAuth => "Missing or malformed Authorization header".into(),
            ApiError::InvalidApiKey => "Invalid API key".into(),
            ApiError::BadSignature => {
                "The callback's signature or credentials do not verify with the configured ones"
                    .into()
            }
            ApiError::Forbidden(m) => (*m).into(),
            ApiError::ProjectDisabled => "This project is disabled".into(),
            ApiError::MethodNotAllowed => "Method not allowed on this path".into(),
            ApiError::PayloadTooLarge { limit } => {
                format!("The request body is larger than {limit} bytes")
            }
            ApiError::RateLimited { .. } => "Rate limit exceeded".into(),
            ApiError::ForwardTimeout => {
                "The node that owns this project did not answer in time; the request may or \
                 may not have taken effect"
                    .into()
            }
            ApiError::Engine(Error::Validation(_)) => "Request validation failed".into(),
            ApiError::Engine(e) if e.is_disk_full() => {
                "The server could not make this write durable: its disk is full. The write may \
                 still take effect once space is freed"
                    .into()
            }
            ApiError::Engine(e) if e.is_unavailable() => {
                "The database did not answer in time; the write may or may not have taken effect"
                    .into()
            }
            ApiError::Engine(Error::Locked { .. } | Error::Storage(_) | Error::Internal(_)) => {
                "An unexpected error occurred".into()
            }
            ApiError::Engine(e) => e.to_string(),
        }
    }

    fn suggestion(&self) -> Option<String> {
        let s = match self {
            ApiError::Suggested(_, s) => return Some(s.clone()),
            ApiError::BadRequest(_) => "Send a valid JSON body with Content-Type: application/json",
            ApiError::MissingAuth => "Send the header Authorization: Bearer <API key>",
            ApiError::InvalidApiKey => {
                "Check the key; keys start with sk_ (secret) or pk_ (public)"
            }
            ApiError::Forbidden(_) => "Use the project's secret key (sk_) for this endpoint",
            ApiError::BadSignature => {
                "Check that [feedback] holds the key (or credentials) the provider signs with, \
                 and that the clocks agree"
            }
            ApiError::ProjectDisabled => {
                "Ask an operator to enable the project (mailroom project enable)"
            }
            ApiError::PayloadTooLarge { .. } => "Send a smaller body",
            ApiError::ForwardTimeout => {
                "Check whether the write took effect, or retry with the same Idempotency-Key"
            }
            ApiError::RateLimited { .. } => {
                "Wait for the number of seconds in Retry-After, then retry"
            }
            ApiError::Engine(Error::Validation(fields)) => {
                match fields.iter().find_map(|f| f.suggestion.clone()) {
                    Some(s) => return Some(s),
                    None => "Fix the fields listed in errors and retry",
                }
            }
            ApiError::Engine(Error::Busy { .. } | Error::NotOwner { .. }) => {
                "Retry after the number of seconds in Retry-After"
            }
            ApiError::Engine(e) if e.is_disk_full() => {
                "Retry later with the same Idempotency-Key (or check first that the write is not \
                 there); the operator has been told through the log that the disk is full"
            }
            ApiError::Engine(e) if e.is_unavailable() => {
                "Retry after the number of seconds in Retry-After, with the same Idempotency-Key"
            }
            ApiError::Engine(Error::Conflict { suggestion, .. }) => return suggestion.clone(),
            _ => return None,
        };
        Some(s.to_owned())
    }

    fn retry_after(&self) -> Option<u64> {
        match self.base() {
            ApiError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            ApiError::Engine(Error::Busy { retry_after_secs }) => Some(*retry_after_secs),
            ApiError::Engine(Error::NotOwner { .. }) => Some(NOT_OWNER_RETRY_SECS),
            ApiError::Engine(e) if e.is_disk_full() => Some(DISK_FULL_RETRY_SECS),
            ApiError::Engine(e) if e.is_unavailable() => Some(UNAVAILABLE_RETRY_SECS),
            _ => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status_and_code().0
    }

    fn error_response(&self) -> HttpResponse {
        let (status, code) = self.status_and_code();
        if let ApiError::Engine(
            e @ (Error::Locked { .. } | Error::Storage(_) | Error::Internal(_)),
        ) = self
        {
            tracing::error!(error = %mailroom_actors::error::chain(e), "internal error");
        }
        let message = self.message();
        let errors = match self.base() {
            // A body can fail in a million places; the first hundred say enough.
            ApiError::Engine(Error::Validation(fields)) => Some(
                fields
                    .iter()
                    .take(MAX_FIELD_ERRORS)
                    .map(|f| FieldErrorView {
                        field: f.field.clone(),
                        message: f.message.clone(),
                        code: f.code.as_str(),
                    })
                    .collect(),
            ),
            _ => None,
        };
        let body = ErrorBody {
            success: false,
            error: ErrorDetail {
                code,
                message: message.clone(),
                status_code: status.as_u16(),
                request_id: request_id::current(),
                errors,
                suggestion: self.suggestion(),
            },
            message,
            timestamp: now_iso(),
        };
        let mut res = HttpResponse::build(status).json(body);
        if let Some(secs) = self.retry_after() {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                res.headers_mut().insert(RETRY_AFTER, v);
            }
        }
        res
    }
}

/// The one form of every error answer (API.md section 1).
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    success: bool,
    error: ErrorDetail,
    /// The same text as `error.message`, for clients of the older short form.
    message: String,
    timestamp: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    code: &'static str,
    message: String,
    status_code: u16,
    request_id: String,
    /// A 422's fields (at most 100), with zod's codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<Vec<FieldErrorView>>,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    suggestion: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct FieldErrorView {
    field: String,
    message: String,
    code: &'static str,
}

/// How long a client should wait when the project's owner is changing: a lease moves
/// within a heartbeat, and forwarding usually hides it.
const NOT_OWNER_RETRY_SECS: u64 = 1;
/// A database that timed out is often back within a second or two (a failover, a
/// reconnect).
const UNAVAILABLE_RETRY_SECS: u64 = 2;

/// How long a client should wait when the disk is full.
const DISK_FULL_RETRY_SECS: u64 = 5;

/// The most field errors one 422 lists.
const MAX_FIELD_ERRORS: usize = 100;

/// Now, as an error body's `timestamp`.
fn now_iso() -> String {
    Timestamp::from(chrono::Utc::now()).to_iso()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_that_did_not_answer_in_time_is_a_503_with_retry_after_not_a_500() {
        let late = ApiError::Engine(Error::unavailable("a commit got no answer"));
        assert_eq!(
            late.status_and_code(),
            (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE")
        );
        assert_eq!(late.retry_after(), Some(UNAVAILABLE_RETRY_SECS));
        let broken = ApiError::Engine(Error::storage("a record does not decode"));
        assert_eq!(
            broken.status_and_code().0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(broken.retry_after(), None);
    }
}
