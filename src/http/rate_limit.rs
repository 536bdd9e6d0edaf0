//! The per-project API rate limit: a GCRA budget of `limits.requests_per_minute`
//! (`mailroom_actors::pace`), checked when a request authenticates. Every response to an
//! authenticated request carries `RateLimit-Limit`, `-Remaining` and `-Reset`. The
//! budget's state moves with the project: a lease move does not refill it.

use std::sync::Arc;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use mailroom_actors::engine::requests::{Pace, Verdict};
use mailroom_actors::model::ProjectId;

use crate::api::error::ApiError;

pub struct ProjectRateLimit {
    pace: Arc<Pace>,
    per_minute: u32,
}

/// What the headers of this response should say.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitInfo {
    pub limit: u32,
    pub remaining: u32,
    pub reset_secs: u64,
}

impl ProjectRateLimit {
    /// None when the limit is off (`0`).
    pub fn new(per_minute: u32) -> Option<Self> {
        (per_minute > 0).then(|| ProjectRateLimit {
            // One request back every 60/limit seconds, the whole limit at once.
            pace: Arc::new(Pace::new(
                Duration::from_secs_f64(60.0 / f64::from(per_minute)),
                per_minute,
            )),
            per_minute,
        })
    }

    /// The budget's state, for the registry to hand over with each project.
    pub fn pace(&self) -> Arc<Pace> {
        self.pace.clone()
    }

    /// Takes one request from the project's budget.
    pub fn check(&self, project: ProjectId) -> (RateLimitInfo, Result<(), ApiError>) {
        match self.pace.check(project) {
            Verdict::Allowed { remaining, full_in } => {
                let info = RateLimitInfo {
                    limit: self.per_minute,
                    remaining,
                    reset_secs: full_in.as_secs_f64().ceil() as u64,
                };
                (info, Ok(()))
            }
            Verdict::Wait(wait) => {
                let retry_after_secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                let info = RateLimitInfo {
                    limit: self.per_minute,
                    remaining: 0,
                    reset_secs: 60,
                };
                (info, Err(ApiError::RateLimited { retry_after_secs }))
            }
        }
    }
}

/// Copies the `RateLimitInfo` that authentication left on the request into headers.
pub async fn headers(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut res = next.call(req).await?;
    let info = res.request().extensions().get::<RateLimitInfo>().copied();
    if let Some(info) = info {
        let h = res.headers_mut();
        for (name, value) in [
            ("ratelimit-limit", info.limit as u64),
            ("ratelimit-remaining", info.remaining as u64),
            ("ratelimit-reset", info.reset_secs),
        ] {
            if let Ok(v) = HeaderValue::from_str(&value.to_string()) {
                h.insert(HeaderName::from_static(name), v);
            }
        }
    }
    Ok(res)
}
