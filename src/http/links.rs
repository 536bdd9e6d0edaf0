//! The links in marketing mail, which recipients follow without any key: the
//! unsubscribe page and its one-click POST (RFC 8058), the open pixel and click
//! redirects. A token that fails its signature is a 404, like any unknown path; what a
//! valid one still does is the engine's call (`Links::resolve`).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use mailroom_actors::engine::emails::Hit;
use mailroom_actors::engine::links::{Link, Recipient, Resolved};
use mailroom_actors::model::{CampaignId, ContactId, EmailId, ProjectId};
use mailroom_actors::{Error, Resource};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::api::error::ApiError;
use crate::state::AppState;

type Keyed = governor::RateLimiter<
    (EmailId, bool),
    governor::state::keyed::DashMapStateStore<(EmailId, bool)>,
    governor::clock::DefaultClock,
>;

/// Hits of one email's pixel (or of its links) that are recorded, at most
/// `PER_MINUTE` a minute: whoever holds a link can fetch it in a loop, and every
/// recorded hit is a write to the tenant's store. Hits past it still get the pixel
/// or the redirect.
pub struct HitLimit {
    limiter: Keyed,
    checks: std::sync::atomic::AtomicU64,
}

const PER_MINUTE: u32 = 10;

impl Default for HitLimit {
    fn default() -> Self {
        let quota = governor::Quota::per_minute(
            std::num::NonZeroU32::new(PER_MINUTE).unwrap_or(std::num::NonZeroU32::MIN),
        );
        HitLimit {
            limiter: governor::RateLimiter::dashmap(quota),
            checks: Default::default(),
        }
    }
}

impl HitLimit {
    fn allow(&self, email: EmailId, click: bool) -> bool {
        // Forget emails not seen for a while, now and then, so the map stays small.
        let n = self
            .checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n.is_multiple_of(10_000) {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&(email, click)).is_ok()
    }
}

/// A transparent 1x1 GIF.
const PIXEL: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// What a token does now (see `Links::resolve`); a token this server did not make is a
/// 404.
fn resolve(state: &AppState, token: &str) -> Result<Resolved, ApiError> {
    state
        .engine
        .links()
        .resolve(token)?
        .ok_or_else(|| Error::NotFound(Resource::Route).into())
}

fn not_found() -> ApiError {
    Error::NotFound(Resource::Route).into()
}

/// What the recipient's pages may load: nothing but their own inline style, and forms
/// that post back here; no framing (no clickjacked unsubscribe button).
const PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

const PAGE_STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:32em;margin:4em auto;\
     padding:0 1em;text-align:center;color:#222}button{font:inherit;padding:.5em 1.5em;\
     cursor:pointer}p{line-height:1.5}";

/// A page for the recipient: maud escapes whatever came from a tenant or a recipient.
fn page(status: StatusCode, title: &str, body: Markup) -> HttpResponse {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width";
                title { (title) }
                style { (PreEscaped(PAGE_STYLE)) }
            }
            body { main { h1 { (title) } (body) } }
        }
    };
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CONTENT_SECURITY_POLICY, PAGE_CSP))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(doc.into_string())
}

/// An unsubscribe link past its days after a rotation of its project's keys.
fn expired() -> HttpResponse {
    page(
        StatusCode::NOT_FOUND,
        "This link has expired",
        html! {
            p { "This unsubscribe link is no longer valid. A newer email from the same sender carries one that is." }
        },
    )
}

/// The sender and the address as the page names them (text; the page escapes it).
struct Named {
    sender: String,
    address: Option<String>,
}

fn named(r: &Recipient) -> Named {
    let sender = match (&r.sender.name, &r.sender.address) {
        (Some(name), Some(address)) => format!("{name} ({})", address.as_str()),
        (Some(name), None) => name.clone(),
        (None, Some(address)) => address.as_str().to_owned(),
        (None, None) => "these emails".to_owned(),
    };
    Named {
        sender,
        address: r.masked.clone(),
    }
}

/// An unsubscribe token that still works: what it is about, and who the page names.
struct LiveToken {
    project: ProjectId,
    contact: ContactId,
    campaign: Option<CampaignId>,
    named: Named,
}

/// Either a valid unsubscribe token, or the page to answer instead (expired).
fn live_token(state: &AppState, token: &str) -> Result<Result<LiveToken, HttpResponse>, ApiError> {
    let Resolved {
        link:
            Link::Unsubscribe {
                project,
                contact,
                campaign,
            },
        live,
    } = resolve(state, token)?
    else {
        return Err(not_found());
    };
    if !live {
        return Ok(Err(expired()));
    }
    let r = state.engine.links().recipient(project, contact, campaign)?;
    Ok(Ok(LiveToken {
        project,
        contact,
        campaign,
        named: named(&r),
    }))
}

/// GET /unsubscribe/{token}: a page with one button (a GET changes nothing, so mail
/// scanners that follow links do not unsubscribe anyone).
pub async fn unsubscribe_page(
    token: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let v = match live_token(&state, &token)? {
        Ok(v) => v,
        Err(page) => return Ok(page),
    };
    Ok(page(
        StatusCode::OK,
        "Unsubscribe",
        html! {
            p { "Unsubscribe from " (v.named.sender) "?" }
            @if let Some(a) = &v.named.address {
                p { "Emails to " strong { (a) } " will stop." }
            }
            form method="post" action=(token.as_str()) {
                button type="submit" { "Unsubscribe" }
            }
        },
    ))
}

/// POST /unsubscribe/{token}: the one-click unsubscribe (RFC 8058: a mail client posts
/// `List-Unsubscribe=One-Click`, which needs no reading); doing it twice is harmless.
/// The page it answers offers to take it back.
pub async fn unsubscribe(
    token: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let v = match live_token(&state, &token)? {
        Ok(v) => v,
        Err(page) => return Ok(page),
    };
    let (contact, campaign) = (v.contact, v.campaign);
    state
        .engine
        .links()
        .unsubscribe(v.project, contact, campaign)
        .await?;
    Ok(page(
        StatusCode::OK,
        "You are unsubscribed",
        html! {
            p {
                "You will not receive emails from " (v.named.sender)
                @if let Some(a) = &v.named.address { " to " strong { (a) } }
                " any more."
            }
            form method="post" action={ (token.as_str()) "/resubscribe" } {
                p { "Unsubscribed by mistake?" }
                button type="submit" { "Resubscribe" }
            }
        },
    ))
}

/// POST /unsubscribe/{token}/resubscribe: the confirmation page's button. It undoes only
/// what an unsubscribe link did (see `unsubscribe::resubscribe`); anything else is a 409
/// page that sends the recipient to the sender.
pub async fn resubscribe(
    token: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let v = match live_token(&state, &token)? {
        Ok(v) => v,
        Err(page) => return Ok(page),
    };
    let (contact, campaign) = (v.contact, v.campaign);
    let subscribed = state
        .engine
        .links()
        .resubscribe(v.project, contact, campaign)
        .await?;
    if !subscribed {
        return Ok(page(
            StatusCode::CONFLICT,
            "This link cannot resubscribe you",
            html! {
                p {
                    "This address was not unsubscribed through this link. To receive emails from "
                    (v.named.sender) " again, ask the sender."
                }
            },
        ));
    }
    Ok(page(
        StatusCode::OK,
        "You are subscribed again",
        html! {
            p {
                "You will receive emails from " (v.named.sender)
                @if let Some(a) = &v.named.address { " at " strong { (a) } }
                " again."
            }
            form method="post" action={ "../" (token.as_str()) } {
                button type="submit" { "Unsubscribe" }
            }
        },
    ))
}

/// GET /t/o/{token}: the open pixel. A disabled project's, or one from before a
/// rotation of its keys, records nothing.
pub async fn open(
    token: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Resolved {
        link: Link::Open { project, email },
        live,
    } = resolve(&state, &token)?
    else {
        return Err(not_found());
    };
    // A recipient gets the pixel whatever befalls the bookkeeping.
    if !live {
        tracing::debug!(%email, "open not recorded: the project is disabled or its keys rotated");
    } else if !state.hits.allow(email, false) {
        tracing::debug!(%email, "open not recorded: this email's pixel is fetched too often");
    } else if let Err(e) = state
        .engine
        .emails()
        .record_hit(project, email, Hit::Open, None)
        .await
    {
        tracing::warn!(%email, error = %e, "recording an open");
    }
    Ok(HttpResponse::Ok()
        .content_type("image/gif")
        .insert_header((header::CACHE_CONTROL, "no-store, max-age=0"))
        .body(PIXEL))
}

/// GET /t/c/{token}: a click, then on to the link's own target (inside the token). A
/// disabled project's link, or one from before a rotation of its keys, records nothing
/// and redirects nowhere: a page names the target, for the reader to follow or not.
pub async fn click(
    token: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Resolved {
        link: Link::Click {
            project,
            email,
            url,
        },
        live,
    } = resolve(&state, &token)?
    else {
        return Err(not_found());
    };
    if !live {
        return Ok(page(
            StatusCode::OK,
            "This link is no longer active",
            html! {
                p { "The sender of this email can no longer send you through this link. It led to:" }
                p { a href=(url) rel="noopener noreferrer nofollow" { (url) } }
                p { "Follow it only if you trust it." }
            },
        ));
    }
    let target = url.clone();
    // A recipient gets where the link goes whatever befalls the bookkeeping.
    if !state.hits.allow(email, true) {
        tracing::debug!(%email, "click not recorded: this email's links are followed too often");
    } else if let Err(e) = state
        .engine
        .emails()
        .record_hit(project, email, Hit::Click, Some(target))
        .await
    {
        tracing::warn!(%email, error = %e, "recording a click");
    }
    Ok(HttpResponse::Found()
        .insert_header((header::LOCATION, url))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish())
}
