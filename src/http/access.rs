//! The access log (`log.access`): one line per request. The path is logged without its
//! query (which may carry addresses), and no header is, the Authorization header least
//! of all.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;

use super::request_id;

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let method = req.method().to_string();
    let path = req.path().to_owned();
    let started = Instant::now();
    let result = next.call(req).await;
    let status = match &result {
        Ok(res) => res.status(),
        Err(e) => e.as_response_error().status_code(),
    };
    let request_id = result
        .as_ref()
        .ok()
        .and_then(|res| res.headers().get(request_id::HEADER))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    tracing::info!(
        target: "mailroom::access",
        method,
        path,
        status = status.as_u16(),
        ms = started.elapsed().as_secs_f64() * 1000.0,
        request_id,
        "request"
    );
    result
}
