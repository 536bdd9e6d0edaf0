//! The per-project API rate limit: a GCRA budget of `limits.requests_per_minute`
//! (governor), checked when a request authenticates. Every response to an
//! authenticated request carries `RateLimit-Limit`, `-Remaining` and `-Reset`.

use std::num::NonZeroU32;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use mailroom_actors::model::ProjectId;

use super::error::ApiError;

type Keyed =
    RateLimiter<ProjectId, DashMapStateStore<ProjectId>, DefaultClock, StateInformationMiddleware>;

pub struct ProjectRateLimit {
    limiter: Keyed,
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
        let n = NonZeroU32::new(per_minute)?;
        Some(ProjectRateLimit {
            limiter: RateLimiter::dashmap(Quota::per_minute(n))
                .with_middleware::<StateInformationMiddleware>(),
            per_minute,
        })
    }

    /// Takes one request from the project's budget.
    pub fn check(&self, project: ProjectId) -> (RateLimitInfo, Result<(), ApiError>) {
        // Each request refills after 60/limit seconds; the budget is full again after
        // that times the number of requests spent.
        let per_request = 60.0 / self.per_minute as f64;
        match self.limiter.check_key(&project) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                let spent = self.per_minute.saturating_sub(remaining);
                let info = RateLimitInfo {
                    limit: self.per_minute,
                    remaining,
                    reset_secs: (spent as f64 * per_request).ceil() as u64,
                };
                (info, Ok(()))
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let retry_after_secs = wait.as_secs_f64().ceil().max(1.0) as u64;
                let info = RateLimitInfo {
                    limit: self.per_minute,
                    remaining: 0,
                    reset_secs: (self.per_minute as f64 * per_request).ceil() as u64,
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
