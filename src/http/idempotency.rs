//! The `Idempotency-Key` header (/v1/track, /v1/send): turns it and the body into a
//! `Claim` that the project actor checks and records (see `mailroom_actors::idempotency`).

use actix_web::HttpRequest;
use mailroom_actors::engine::requests::{Claim, MAX_KEY_LEN};
use mailroom_actors::{Error, FieldCode};
use serde_json::Value;

use crate::api::error::ApiError;

pub const HEADER: &str = "Idempotency-Key";

/// None without the header; a 422 when the key is empty, too long or not visible ASCII.
pub fn claim(
    req: &HttpRequest,
    scope: &str,
    body: &Value,
    ttl_ms: i64,
) -> Result<Option<Claim>, ApiError> {
    let Some(raw) = req.headers().get(HEADER) else {
        return Ok(None);
    };
    let key = raw.to_str().unwrap_or_default().trim();
    if !Claim::key_is_valid(key) {
        return Err(Error::field(
            HEADER,
            FieldCode::InvalidString,
            format!("{HEADER} must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
        )
        .into());
    }
    Ok(Some(Claim::new(scope, key, body, ttl_ms)))
}
