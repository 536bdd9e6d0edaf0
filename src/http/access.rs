//! The access log (`log.access`): one line per request. The path is logged without its
//! query (which may carry addresses), and no header is, the Authorization header least
//! of all. The token of an unsubscribe or tracking link is a bearer credential for the
//! recipient's subscription, so it is logged as `{token}`.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;

use crate::api::request_id;

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let method = req.method().to_string();
    let path = without_token(req.path());
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

/// The path with a link token replaced by `{token}`.
fn without_token(path: &str) -> String {
    for prefix in ["/unsubscribe/", "/t/o/", "/t/c/"] {
        if path.starts_with(prefix) {
            return format!("{prefix}{{token}}");
        }
    }
    path.to_owned()
}

#[cfg(test)]
mod tests {
    use super::without_token;

    #[test]
    fn link_tokens_stay_out_of_the_access_log() {
        assert_eq!(
            without_token("/unsubscribe/abcDEF123"),
            "/unsubscribe/{token}"
        );
        assert_eq!(without_token("/t/c/abc"), "/t/c/{token}");
        assert_eq!(without_token("/contacts/01a2"), "/contacts/01a2");
    }
}
