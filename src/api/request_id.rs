//! Every response carries `X-Request-Id`, and every error body the same value. The id is
//! made here and held in a task-local for the request's whole handling, which is where
//! error bodies are built.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;

tokio::task_local! {
    static REQUEST_ID: String;
}

pub const HEADER: &str = "x-request-id";

/// The current request's id (a fresh one outside a request, which should not happen).
pub fn current() -> String {
    REQUEST_ID
        .try_with(|id| id.clone())
        .unwrap_or_else(|_| uuid::Uuid::now_v7().to_string())
}

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = uuid::Uuid::now_v7().to_string();
    let mut res = REQUEST_ID.scope(id.clone(), next.call(req)).await?;
    // A forwarded request's answer keeps the owner's id: the one in its error body and
    // in the owner's log.
    if res.headers().contains_key(HEADER) {
        return Ok(res);
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(HeaderName::from_static(HEADER), v);
    }
    Ok(res)
}
