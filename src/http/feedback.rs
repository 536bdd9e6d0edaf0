//! Provider callbacks (API.md 27): Postmark, SendGrid and Mailgun report bounces and
//! complaints by HTTP. No API key: a provider that is not configured is 404, a bad
//! signature (or basic auth) 401, and neither changes anything. Each report is found
//! its email by `Message-ID` (else its project by the recipient) and applied durably
//! before the 200, so a provider that gets no answer sends it again and the second copy
//! changes nothing (reports are idempotent on the provider's event id).

use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use mailroom_actors::engine::feedback::{
    providers, roots_from_pem, ses, Applied, CallbackError, FeedbackConfig, Report, Resolver,
    SnsType, WebhookClient,
};
use mailroom_actors::{Error, Resource};
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

use crate::api::error::ApiError;
use crate::state::AppState;

use crate::api::feedback::CallbackResult;
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
    /// Amazon SES over SNS: the topics taken, and how their certificates are fetched.
    pub ses: Option<Arc<Ses>>,
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

/// `[feedback.ses]`, with the certificates SNS signed with, kept by URL.
pub struct Ses {
    topics: Vec<String>,
    cert_hosts: Vec<String>,
    cert_subject: String,
    min_version: u8,
    /// Extra roots (PEM) for the fetch, read at the start.
    ca: Option<Vec<u8>>,
    client: std::sync::OnceLock<Arc<WebhookClient>>,
    certs: std::sync::Mutex<Certs>,
}

/// Certificates by URL, with when each was last used; and URLs whose fetch failed,
/// with when, so a flood of messages naming one cannot make a fetch each.
#[derive(Default)]
struct Certs {
    held: std::collections::HashMap<String, (Arc<Vec<u8>>, std::time::Instant)>,
    failed: std::collections::HashMap<String, std::time::Instant>,
}

/// How long a failed fetch is not tried again.
const FAILED_FOR: Duration = Duration::from_secs(60);

/// Certificates kept at most (SNS rotates its certificate every few years).
const MAX_CERTS: usize = 16;
/// The largest certificate file fetched.
const MAX_CERT_BYTES: usize = 64 * 1024;

impl Ses {
    fn new(f: &crate::config::SesFeedback) -> Result<Option<Ses>, String> {
        let topics: Vec<String> = f
            .topic_arns
            .iter()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        if topics.is_empty() {
            return Ok(None);
        }
        if f.cert_hosts.is_empty() {
            return Err(
                "feedback.ses.cert_hosts is empty: no certificate could be fetched \
                 (the default is [\"sns.*.amazonaws.com\", \"sns.*.amazonaws.com.cn\"])"
                    .into(),
            );
        }
        let ca = match f.ca_file.trim() {
            "" => None,
            path => {
                let pem =
                    std::fs::read(path).map_err(|e| format!("feedback.ses.ca_file {path}: {e}"))?;
                roots_from_pem(&pem).map_err(|e| format!("feedback.ses.ca_file {path}: {e}"))?;
                Some(pem)
            }
        };
        Ok(Some(Ses {
            topics,
            cert_hosts: f.cert_hosts.clone(),
            cert_subject: f.cert_subject.trim().to_owned(),
            min_version: f.min_signature_version,
            ca,
            client: Default::default(),
            certs: Default::default(),
        }))
    }

    /// Gives the fetches their client (it needs the engine's resolver).
    pub fn connect(&self, resolver: Arc<Resolver>, allow_private: bool, timeout: Duration) {
        let client = match &self.ca {
            Some(pem) => WebhookClient::trusting(resolver.clone(), allow_private, timeout, pem)
                .unwrap_or_else(|_| WebhookClient::new(resolver, allow_private, timeout)),
            None => WebhookClient::new(resolver, allow_private, timeout),
        };
        let _ = self.client.set(Arc::new(client));
    }

    fn client(&self) -> Result<Arc<WebhookClient>, ApiError> {
        self.client
            .get()
            .cloned()
            .ok_or_else(|| Error::Internal("feedback.ses has no HTTP client".into()).into())
    }

    /// The certificate at `url` (checked against `cert_hosts` by the caller): kept, or
    /// fetched once; a 503 when it cannot be had now (SNS sends again later).
    async fn certificate(&self, url: &str) -> Result<Arc<Vec<u8>>, ApiError> {
        {
            let mut certs = self.certs.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((c, used)) = certs.held.get_mut(url) {
                *used = std::time::Instant::now();
                return Ok(c.clone());
            }
            if certs
                .failed
                .get(url)
                .is_some_and(|at| at.elapsed() < FAILED_FOR)
            {
                return Err(unavailable(format!(
                    "The certificate at {url} could not be fetched a moment ago; SNS sends the \
                     notification again later"
                )));
            }
        }
        let got = self.client()?.fetch(url, MAX_CERT_BYTES).await;
        let pem = match got {
            Ok((200, Some(body))) => Arc::new(body),
            other => {
                let why = match other {
                    Ok((200, None)) => format!("it is larger than {MAX_CERT_BYTES} bytes"),
                    Ok((status, _)) => format!("it answered {status}"),
                    Err(e) => e.detail(),
                };
                tracing::warn!(url, why, "fetching the certificate SNS signs with");
                let mut certs = self.certs.lock().unwrap_or_else(|e| e.into_inner());
                if certs.failed.len() >= MAX_CERTS {
                    certs.failed.retain(|_, at| at.elapsed() < FAILED_FOR);
                }
                if certs.failed.len() < MAX_CERTS {
                    certs
                        .failed
                        .insert(url.to_owned(), std::time::Instant::now());
                }
                return Err(unavailable(format!(
                    "The certificate SNS signs with could not be fetched from {url} ({why}); \
                     SNS sends the notification again later"
                )));
            }
        };
        let mut certs = self.certs.lock().unwrap_or_else(|e| e.into_inner());
        if certs.held.len() >= MAX_CERTS {
            // The least recently used goes.
            let oldest = certs
                .held
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                certs.held.remove(&k);
            }
        }
        certs.failed.remove(url);
        certs
            .held
            .insert(url.to_owned(), (pem.clone(), std::time::Instant::now()));
        Ok(pem)
    }
}

fn unavailable(suggestion: String) -> ApiError {
    ApiError::Suggested(
        Box::new(
            Error::Busy {
                retry_after_secs: 60,
            }
            .into(),
        ),
        suggestion,
    )
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
            ses: Ses::new(&f.ses)?.map(Arc::new),
            seen_tokens: Default::default(),
        })
    }
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
        let applied = state
            .engine
            .feedback()
            .apply(&state.callbacks.engine, report)
            .await?;
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
    let raw = crate::api::body::raw(&req, &mut payload.into_inner()).await?;
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
    let raw = crate::api::body::raw(&req, &mut payload.into_inner()).await?;
    let now = mailroom_actors::model::Timestamp::from(state.engine.clock().now()).millis() / 1000;
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
    let raw = crate::api::body::raw(&req, &mut payload.into_inner()).await?;
    let now = mailroom_actors::model::Timestamp::from(state.engine.clock().now()).millis() / 1000;
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

#[utoipa::path(post, path = "/feedback/ses", tag = "Feedback",
    request_body(content = String, description = "An Amazon SNS message (JSON, sent as text/plain) carrying an SES bounce or complaint notification, or a subscription confirmation", content_type = "text/plain"),
    responses((status = 200, body = CallbackResult), (status = 400), (status = 401, description = "a topic not in feedback.ses.topic_arns, or a signature that does not verify"),
              (status = 404, description = "not configured"), (status = 503, description = "the signing certificate could not be fetched; SNS retries")))]
pub async fn ses(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(sns) = state.callbacks.ses.clone() else {
        return Err(not_configured());
    };
    let raw = crate::api::body::raw(&req, &mut payload.into_inner()).await?;
    let m = ses::parse(&raw).map_err(refused)?;
    if !sns.topics.contains(&m.topic_arn) {
        return Err(ApiError::Suggested(
            Box::new(ApiError::BadSignature),
            format!(
                "Topic {} is not in feedback.ses.topic_arns; add it to take its notifications",
                m.topic_arn
            ),
        ));
    }
    if !ses::cert_url_allowed(&m.signing_cert_url, &sns.cert_hosts) {
        return Err(ApiError::Suggested(
            Box::new(ApiError::BadSignature),
            "SigningCertURL must be https://<a host of feedback.ses.cert_hosts>/SimpleNotificationService-<hex>.pem".into(),
        ));
    }
    let now = mailroom_actors::model::Timestamp::from(state.engine.clock().now()).millis() / 1000;
    // What costs nothing is checked before a certificate is fetched.
    ses::precheck(&m, sns.min_version, now).map_err(refused)?;
    let cert = sns.certificate(&m.signing_cert_url).await?;
    ses::verify(&m, &cert, now, &sns.cert_subject).map_err(refused)?;
    match m.kind {
        SnsType::Notification => {
            let reports = ses::reports(&m.message).map_err(refused)?;
            apply_all(&state, reports).await
        }
        SnsType::SubscriptionConfirmation => {
            let url = m.subscribe_url.unwrap_or_default();
            if !ses::url_allowed(&url, &sns.cert_hosts) {
                return Err(ApiError::BadRequest(
                    "SubscribeURL must be https:// on a host of feedback.ses.cert_hosts".into(),
                ));
            }
            match sns
                .client()?
                .fetch(&url, 64 * 1024)
                .await
                .map(|(status, _)| status)
            {
                Ok(200..=299) => {
                    tracing::info!(topic = %m.topic_arn, "confirmed the SNS subscription");
                    Ok(HttpResponse::Ok().json(CallbackResult {
                        subscribed: Some(true),
                        ..Default::default()
                    }))
                }
                other => {
                    let why = match other {
                        Ok(status) => format!("it answered {status}"),
                        Err(e) => e.detail(),
                    };
                    tracing::warn!(topic = %m.topic_arn, why, "confirming the SNS subscription");
                    Err(unavailable(format!(
                        "Confirming the subscription at SubscribeURL failed ({why}); SNS asks again"
                    )))
                }
            }
        }
        SnsType::UnsubscribeConfirmation => {
            tracing::info!(topic = %m.topic_arn, "SNS says this endpoint was unsubscribed");
            Ok(HttpResponse::Ok().json(CallbackResult::default()))
        }
    }
}
