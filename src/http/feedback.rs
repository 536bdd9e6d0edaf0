//! Provider callbacks (API.md 27): Postmark, SendGrid and Mailgun report bounces and
//! complaints by HTTP. No API key: a provider that is not configured is 404, a bad
//! signature (or basic auth) 401, and neither changes anything. Each report is found
//! its email by `Message-ID` (else its project by the recipient) and applied durably
//! before the 200, so a provider that gets no answer sends it again and the second copy
//! changes nothing (reports are idempotent on the provider's event id).

use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use mailroom_actors::feedback::providers::{self, CallbackError};
use mailroom_actors::feedback::{self, Applied, FeedbackConfig, Report};
use mailroom_actors::{Error, Resource};
use serde::Serialize;
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use super::error::ApiError;
use super::AppState;

/// What the edge keeps of `[feedback]`.
#[derive(Clone, Default)]
pub struct Callbacks {
    pub engine: FeedbackConfig,
    pub max_age_secs: i64,
    /// Postmark's basic auth: `user:password`, as the header carries it (base64).
    pub postmark: Option<String>,
    /// SendGrid's key, as the point it names.
    pub sendgrid: Option<Vec<u8>>,
    pub mailgun: Option<String>,
    /// Mailgun tokens seen within the signature's age, with the SHA-256 of the body they
    /// came with (the HMAC covers only the timestamp and the token): the same token with
    /// another body is refused; with the same body (Mailgun's retry) it is taken again.
    seen_tokens: std::sync::Arc<std::sync::Mutex<SeenTokens>>,
}

/// Token -> (SHA-256 of its body, until when it is remembered).
type SeenTokens = std::collections::HashMap<String, ([u8; 32], i64)>;

/// Mailgun tokens remembered at most (older ones go first).
const MAX_TOKENS: usize = 100_000;

impl Callbacks {
    /// Whether `token` may carry `body` (new, or seen with this very body).
    fn token_fits(&self, token: &str, body: &[u8], now: i64) -> bool {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(body).into();
        let mut seen = self.seen_tokens.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_TOKENS {
            seen.retain(|_, (_, until)| *until > now);
        }
        match seen.get(token) {
            Some((d, _)) => *d == digest,
            None if seen.len() >= MAX_TOKENS => false,
            None => {
                seen.insert(token.to_owned(), (digest, now + self.max_age_secs));
                true
            }
        }
    }
}

impl Callbacks {
    pub fn new(f: &crate::config::Feedback) -> Result<Callbacks, String> {
        let set = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
        let sendgrid = match set(&f.sendgrid.public_key) {
            None => None,
            Some(k) => Some(providers::sendgrid_key(&k).ok_or(
                "feedback.sendgrid.public_key is not a P-256 public key in base64 \
                 (copy the verification key SendGrid shows for the Event Webhook)",
            )?),
        };
        Ok(Callbacks {
            engine: f.engine(),
            max_age_secs: f.max_signature_age_seconds.max(1) as i64,
            postmark: match (set(&f.postmark.username), set(&f.postmark.password)) {
                (Some(u), Some(p)) => {
                    Some(base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")))
                }
                _ => None,
            },
            sendgrid,
            mailgun: set(&f.mailgun.signing_key),
            seen_tokens: Default::default(),
        })
    }
}

/// What a callback did with the reports it carried.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct CallbackResult {
    /// Bounces and complaints in the payload.
    pub reports: u32,
    pub applied: u32,
    /// Applied before (the provider sent it again).
    pub duplicates: u32,
    /// Naming no email and no contact this server knows.
    pub unmatched: u32,
}

fn not_configured() -> ApiError {
    Error::NotFound(Resource::Route).into()
}

fn refused(e: CallbackError) -> ApiError {
    match e {
        CallbackError::BadSignature => ApiError::BadSignature,
        CallbackError::BadPayload(m) => ApiError::BadRequest(m),
    }
}

async fn apply_all(state: &AppState, reports: Vec<Report>) -> Result<HttpResponse, ApiError> {
    let mut out = CallbackResult::default();
    for report in reports {
        out.reports += 1;
        let registry = state.registry.clone();
        let probe = report.clone();
        let found = super::blocking(move || feedback::effects::locate(&registry, &probe)).await?;
        let mut applied = Applied::Unmatched;
        for (p, email) in found {
            let one = feedback::apply(
                &state.registry,
                &state.callbacks.engine,
                p,
                email,
                report.clone(),
            )
            .await?;
            // Done anywhere is done; a duplicate everywhere is a duplicate.
            applied = match (applied, one) {
                (Applied::Done, _) | (_, Applied::Done) => Applied::Done,
                (Applied::Duplicate, _) | (_, Applied::Duplicate) => Applied::Duplicate,
                _ => Applied::Unmatched,
            };
        }
        match applied {
            Applied::Done => out.applied += 1,
            Applied::Duplicate => out.duplicates += 1,
            Applied::Unmatched => {
                tracing::info!("a delivery report names no email or contact here; dropped");
                out.unmatched += 1
            }
        }
    }
    Ok(HttpResponse::Ok().json(out))
}

#[utoipa::path(post, path = "/feedback/postmark", tag = "Feedback",
    request_body(content = String, description = "Postmark's bounce or spam-complaint webhook (JSON)", content_type = "application/json"),
    responses((status = 200, body = CallbackResult), (status = 400), (status = 401), (status = 404, description = "not configured")))]
pub async fn postmark(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(expected) = state.callbacks.postmark.as_deref() else {
        return Err(not_configured());
    };
    let given = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .unwrap_or_default()
        .trim();
    if !bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        return Err(refused(CallbackError::BadSignature));
    }
    let raw = super::body::raw(&req, &mut payload.into_inner()).await?;
    let reports = providers::postmark(&raw).map_err(refused)?;
    apply_all(&state, reports).await
}

#[utoipa::path(post, path = "/feedback/sendgrid", tag = "Feedback",
    request_body(content = String, description = "SendGrid's Event Webhook (a JSON array), signed", content_type = "application/json"),
    responses((status = 200, body = CallbackResult), (status = 400), (status = 401), (status = 404, description = "not configured")))]
pub async fn sendgrid(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(point) = state.callbacks.sendgrid.clone() else {
        return Err(not_configured());
    };
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let signature = header("x-twilio-email-event-webhook-signature");
    let timestamp = header("x-twilio-email-event-webhook-timestamp");
    let raw = super::body::raw(&req, &mut payload.into_inner()).await?;
    let now = mailroom_actors::model::Timestamp::from(state.clock.now()).millis() / 1000;
    let fresh = timestamp
        .parse::<i64>()
        .is_ok_and(|t| now.abs_diff(t) <= state.callbacks.max_age_secs.unsigned_abs());
    if !fresh || !providers::sendgrid_signed(&point, &timestamp, &raw, &signature) {
        return Err(refused(CallbackError::BadSignature));
    }
    let reports = providers::sendgrid(&raw).map_err(refused)?;
    apply_all(&state, reports).await
}

#[utoipa::path(post, path = "/feedback/mailgun", tag = "Feedback",
    request_body(content = String, description = "Mailgun's webhook (JSON with signature and event-data)", content_type = "application/json"),
    responses((status = 200, body = CallbackResult), (status = 400), (status = 401), (status = 404, description = "not configured")))]
pub async fn mailgun(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(key) = state.callbacks.mailgun.clone() else {
        return Err(not_configured());
    };
    let raw = super::body::raw(&req, &mut payload.into_inner()).await?;
    let now = mailroom_actors::model::Timestamp::from(state.clock.now()).millis() / 1000;
    let reports =
        providers::mailgun(&raw, &key, now, state.callbacks.max_age_secs).map_err(refused)?;
    let token = serde_json::from_slice::<serde_json::Value>(&raw)
        .ok()
        .and_then(|v| v["signature"]["token"].as_str().map(str::to_owned))
        .unwrap_or_default();
    if !state.callbacks.token_fits(&token, &raw, now) {
        return Err(refused(CallbackError::BadSignature));
    }
    apply_all(&state, reports).await
}
