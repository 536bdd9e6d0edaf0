//! Any node answers any request (a cluster, docs/cluster.md): a request for a project this
//! node does not own is passed to the node that does, and its answer passed back as it
//! came. The owner marks every answer to a project's request with `X-Mailroom-Node`.
//!
//! The project of a request is found the way the handlers find it: from the API key
//! (an unknown key is first read from the database, a few dozen such reads a second at
//! most, so that a key made on another node or by the CLI works at once), from the project id of an admin path
//! (`/admin/projects/{id}/...`), or from the signed token of an unsubscribe, open or click
//! link. Requests with none of these (project creation, /health, the dashboard) are
//! served where they land.
//!
//! A forwarded request carries `X-Mailroom-Forwarded-By` and a proof of `cluster.secret`;
//! a node serves a forwarded request only with a valid proof, and never forwards one
//! again (a second hop means the nodes disagree about the owner for a moment: 503, retry).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpResponse};
use bytes::Bytes;
use futures_util::StreamExt;
use hmac::{Hmac, Mac};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mailroom_actors::engine::projects::Missing;
use mailroom_actors::model::{ApiKey, KeyKind, ProjectId};
use mailroom_actors::Error;
use sha2::Sha256;

use crate::api::client_addr::ForwardedClient;
use crate::api::error::ApiError;
use crate::cluster::{ClusterNode, Route};
use crate::state::AppState;

pub const NODE_HEADER: &str = "x-mailroom-node";
pub const FORWARDED_BY: &str = "x-mailroom-forwarded-by";
pub const FORWARD_AUTH: &str = "x-mailroom-forward-auth";
/// The address of the client a forwarded request came from, vouched for by the proof:
/// the owner's per-address guards (admin tokens) count the client, not the node.
pub const CLIENT_ADDR: &str = "x-mailroom-client-addr";

/// How far a forwarded request's timestamp may be from the receiver's clock: covers the
/// nodes' clock drift and a request's time in flight, and bounds a replay.
const PROOF_WINDOW_MS: i64 = 30_000;

/// Headers of one connection, not of the request (RFC 9110 7.6.1): never passed on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

pub type ForwardClient =
    Client<hyper_util::client::legacy::connect::HttpConnector, http_body_util::Full<Bytes>>;

pub fn client() -> ForwardClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// The SHA-256 of a forwarded request's body (hex), which its proof covers: the owner
/// checks the body it reads against it.
pub const BODY_DIGEST: &str = "x-mailroom-body-sha256";

/// What a forwarding proof covers: the request line, its `Authorization` header and the
/// SHA-256 of its body, when it was sent, by which node, for which client, and a nonce.
/// A captured proof is good for this request only, once (`ReplayCache`), within
/// `PROOF_WINDOW_MS`.
struct Signed<'a> {
    /// The node it is sent to: a proof is good at that node only.
    to: &'a str,
    method: &'a str,
    target: &'a str,
    authorization: &'a str,
    body_sha256: &'a str,
    at_ms: i64,
    nonce: &'a str,
    node: &'a str,
    client: &'a str,
}

fn mac(secret: &str, s: &Signed) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    for part in [
        "mailroom-forward-3",
        s.to,
        s.method,
        s.target,
        s.authorization,
        s.body_sha256,
        &s.at_ms.to_string(),
        s.nonce,
        s.node,
        s.client,
    ] {
        // Each part's length first: no two different requests sign the same bytes.
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part.as_bytes());
    }
    mac
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The proof of `cluster.secret` a forwarded request carries
/// (`<ms>.<nonce>.<hex HMAC>`): the secret itself never crosses the network.
fn proof(secret: &str, s: &Signed) -> String {
    let tag = mac(secret, s).finalize().into_bytes();
    format!("{}.{}.{}", s.at_ms, s.nonce, hex(&tag))
}

/// A request as a node forwards it: what its proof covers.
pub struct Forwarded<'a> {
    /// The node it is sent to.
    pub to: &'a str,
    pub method: &'a str,
    /// The path and query.
    pub target: &'a str,
    /// The `Authorization` header ("" without one).
    pub authorization: &'a str,
    pub body: &'a [u8],
    /// The forwarding node's id.
    pub node: &'a str,
    /// The client's address the forwarding node vouches for.
    pub client: &'a str,
}

impl Forwarded<'_> {
    /// The headers that carry the request's proof of `secret`, made now with a fresh
    /// nonce (the owner accepts them once).
    pub fn headers(&self, secret: &str) -> [(&'static str, String); 4] {
        let (digest, nonce) = (body_digest(self.body), nonce());
        let signed = Signed {
            to: self.to,
            method: self.method,
            target: self.target,
            authorization: self.authorization,
            body_sha256: &digest,
            at_ms: now_ms(),
            nonce: &nonce,
            node: self.node,
            client: self.client,
        };
        [
            (FORWARDED_BY, self.node.to_owned()),
            (FORWARD_AUTH, proof(secret, &signed)),
            (BODY_DIGEST, digest),
            (CLIENT_ADDR, self.client.to_owned()),
        ]
    }
}

/// A fresh nonce for a proof: two identical requests forwarded in the same millisecond
/// are still two proofs.
fn nonce() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("the OS random number generator");
    hex(&bytes)
}

fn body_digest(body: &[u8]) -> String {
    use sha2::Digest;
    hex(&Sha256::digest(body))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// What a valid proof vouches for.
struct Vouched {
    client: std::net::IpAddr,
    body_sha256: [u8; 32],
    /// The HMAC itself: the key of the replay cache.
    tag: [u8; 32],
    at_ms: i64,
}

/// Whether `req` carries a valid, fresh proof; what it vouches for. (Whether it was
/// shown before is the caller's question: `ReplayCache`.)
fn verify(req: &ServiceRequest, secret: &str, me: &str) -> Option<Vouched> {
    let mut parts = header(req, FORWARD_AUTH)?.splitn(3, '.');
    let (at, nonce, tag) = (parts.next()?, parts.next()?, parts.next()?);
    let at_ms: i64 = at.parse().ok()?;
    if (now_ms() - at_ms).abs() > PROOF_WINDOW_MS || nonce.len() > 64 {
        return None;
    }
    let tag = unhex32(tag)?;
    let digest = header(req, BODY_DIGEST)?;
    let body_sha256 = unhex32(digest)?;
    let client = header(req, CLIENT_ADDR)?;
    let signed = Signed {
        to: me,
        method: req.method().as_str(),
        target: target_of(req),
        authorization: header(req, AUTHORIZATION.as_str()).unwrap_or(""),
        body_sha256: digest,
        at_ms,
        nonce,
        node: header(req, FORWARDED_BY)?,
        client,
    };
    mac(secret, &signed).verify_slice(&tag).ok()?;
    Some(Vouched {
        client: client.parse().ok()?,
        body_sha256,
        tag,
        at_ms,
    })
}

/// The request's body as it streams to the handler, checked at its end against the
/// digest the proof covers: a body swapped under a captured proof fails to read (400)
/// before any handler acts on it.
fn checked_body(req: &mut ServiceRequest, expected: [u8; 32]) {
    use sha2::Digest;
    let mut payload = req.take_payload();
    let mut hasher = Some(Sha256::new());
    let stream = futures_util::stream::poll_fn(move |cx| {
        use std::task::Poll;
        let Some(h) = hasher.as_mut() else {
            return Poll::Ready(None);
        };
        match payload.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                h.update(&chunk);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => {
                let got = hasher.take().map(|h| h.finalize());
                if got.is_some_and(|g| g.as_slice() == expected) {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(actix_web::error::PayloadError::Io(
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "the body is not the one the forwarding proof covers",
                        ),
                    ))))
                }
            }
            Poll::Pending => Poll::Pending,
        }
    });
    let boxed: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<Bytes, actix_web::error::PayloadError>>>,
    > = Box::pin(stream);
    req.set_payload(actix_web::dev::Payload::Stream { payload: boxed });
}

fn target_of(req: &ServiceRequest) -> &str {
    req.uri()
        .path_and_query()
        .map_or(req.path(), |pq| pq.as_str())
}

fn header<'a>(req: &'a ServiceRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Which project `req` is for, when it names one.
async fn project_of(
    req: &ServiceRequest,
    state: &AppState,
    cluster: &ClusterNode,
) -> Option<ProjectId> {
    let path = req.path();
    for prefix in ["/unsubscribe/", "/t/o/", "/t/c/"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            let token = rest.split('/').next()?;
            return state.engine.links().project_of(token);
        }
    }
    if path == "/app" || path.starts_with("/app/") {
        return dashboard_project(req, state).await;
    }
    if let Some(rest) = path.strip_prefix("/admin/projects/") {
        // Routed only for the holder of the admin token and a project that exists: an
        // anonymous caller must not make this node read the lease table, or take and
        // load a project, for a made-up id. The handler here answers everyone else.
        // The guard is asked before the token is compared: a blocked address is
        // answered here, the same for a right token and a wrong one (no forward, no
        // X-Mailroom-Node to tell them apart); a wrong token is counted here, so no
        // path (one no handler takes) compares tokens for free.
        let expected = state.admin_token.as_deref()?;
        let given = header(req, AUTHORIZATION.as_str())?.strip_prefix("Bearer ")?;
        let client = crate::api::client_addr::of_service_request(req, &state.trusted_proxies);
        if state.guard.blocked_for(client).await.is_some() {
            return None;
        }
        if !crate::api::guard::token_matches(expected, given.trim()) {
            let wait = state.guard.failed(client).await;
            req.extensions_mut()
                .insert(crate::api::guard::Charged(wait));
            return None;
        }
        let id: ProjectId = rest.split('/').next()?.parse().ok()?;
        let missing = Missing::Project(id);
        if state.engine.projects().get(id).is_err() && !cluster.read_through(missing).await {
            return None;
        }
        return state.engine.projects().get(id).ok().map(|_| id);
    }
    let key = bearer_key(req)?;
    if let Ok(Some(auth)) = state.engine.projects().authenticate(&key) {
        return Some(auth.project.id);
    }
    // Perhaps made a moment ago on another node, or by the CLI.
    if cluster.read_through(Missing::ApiKey(key.hash())).await {
        if let Ok(Some(auth)) = state.engine.projects().authenticate(&key) {
            return Some(auth.project.id);
        }
    }
    None
}

/// The API key of the request's `Authorization: Bearer` header, when it holds one.
fn bearer_key(req: &ServiceRequest) -> Option<ApiKey> {
    let bearer = header(req, AUTHORIZATION.as_str())?;
    let (scheme, token) = bearer.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    ApiKey::parse(token.trim())
}

/// The project a dashboard session works on. Sessions live in the store, so the owner
/// reads the one this request names wherever it was started, and the request is
/// forwarded like any other.
async fn dashboard_project(req: &ServiceRequest, state: &AppState) -> Option<ProjectId> {
    use crate::dashboard::session::{Principal, COOKIE};
    let id = req
        .headers()
        .get_all(actix_web::http::header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())?;
    let now = mailroom_actors::model::Timestamp::from(state.engine.clock().now()).millis();
    match state
        .dashboard
        .sessions
        .get(&id, now)
        .await
        .ok()??
        .principal
    {
        Principal::Project { id, .. } => Some(id),
        Principal::Admin { picked } => picked,
    }
}

pub async fn middleware(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let Some(cluster) = state.cluster.clone() else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let forwarded = header(&req, FORWARDED_BY).is_some();
    if forwarded {
        let vouched = cluster
            .identity
            .secret
            .as_deref()
            .and_then(|secret| verify(&req, secret, &cluster.identity.node_id))
            .filter(|v| {
                cluster
                    .proofs
                    .first_use(v.tag, v.at_ms + PROOF_WINDOW_MS, now_ms())
            });
        let Some(vouched) = vouched else {
            return Ok(req.error_response(ApiError::Forbidden(
                "X-Mailroom-Forwarded-By is for the nodes of a cluster, with a fresh proof of cluster.secret used once",
            )));
        };
        req.extensions_mut().insert(ForwardedClient(vouched.client));
        checked_body(&mut req, vouched.body_sha256);
    }
    let Some(project) = project_of(&req, &state, &cluster).await else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let route = match cluster.route(project).await {
        Ok(route) => route,
        // No such project (deleted a moment ago): the handlers here say so.
        Err(Error::NotFound(_)) => return Ok(next.call(req).await?.map_into_boxed_body()),
        Err(e @ Error::NotOwner { .. }) => return Ok(unserved(req, &cluster, ApiError::Engine(e))),
        Err(e) => {
            // The lease table could not be read: a passing condition of the cluster, not
            // a fault of this request.
            tracing::warn!(%project, error = %e, "routing a request failed");
            let e = ApiError::Engine(Error::NotOwner { project });
            return Ok(unserved(req, &cluster, e));
        }
    };
    match route {
        Route::Serve => serve(req, next, &cluster).await,
        Route::Forward { .. } if forwarded => {
            // The sender thought this node the owner; this node thinks otherwise (the
            // project is moving). The sender re-routes and tries again; so does this
            // node, reading the holder afresh.
            cluster.forget_holder(project);
            let mut res = unserved(req, &cluster, ApiError::Engine(Error::NotOwner { project }));
            res.headers_mut().insert(
                HeaderName::from_static(MOVING),
                HeaderValue::from_static("1"),
            );
            Ok(res)
        }
        Route::Forward { node, url } => {
            let Some(secret) = cluster.identity.secret.clone() else {
                let e = ApiError::Engine(Error::NotOwner { project });
                return Ok(unserved(req, &cluster, e));
            };
            cluster.metrics.forwards.fetch_add(1, Ordering::Relaxed);
            match forward(req, &state, &cluster, &secret, project, (node, url)).await {
                Ok(res) => Ok(res),
                Err(Failed::Here(req)) => serve(req, next, &cluster).await,
                Err(Failed::Unreached(req, e)) => {
                    tracing::warn!(%project, error = %e, "forwarding failed");
                    let e = ApiError::Engine(Error::NotOwner { project });
                    Ok(unserved(req, &cluster, e))
                }
                Err(Failed::Unknown(req, e)) => {
                    tracing::warn!(%project, error = %e, "forwarded request without an answer");
                    Ok(unserved(req, &cluster, ApiError::ForwardTimeout))
                }
            }
        }
    }
}

/// Serves `req` here, marking the answer with this node's id.
async fn serve(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
    cluster: &ClusterNode,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let mut res = next.call(req).await?.map_into_boxed_body();
    mark(&mut res, cluster);
    Ok(res)
}

/// An error answered by this node for a request it could not have served: marked with
/// this node's id, so that an operator sees which node said so.
fn unserved(req: ServiceRequest, cluster: &ClusterNode, e: ApiError) -> ServiceResponse<BoxBody> {
    let mut res = req.error_response(e);
    mark(&mut res, cluster);
    res
}

fn mark(res: &mut ServiceResponse<BoxBody>, cluster: &ClusterNode) {
    if let Ok(v) = HeaderValue::from_str(&cluster.identity.node_id) {
        res.headers_mut()
            .insert(HeaderName::from_static(NODE_HEADER), v);
    }
}

/// Why a forward gave no answer to pass back.
enum Failed {
    /// The project moved to this node meanwhile: serve it here (the body is put back).
    Here(ServiceRequest),
    /// No owner took the request: nothing happened, the client may retry.
    Unreached(ServiceRequest, String),
    /// The owner had the request but its answer did not come: the outcome is unknown.
    Unknown(ServiceRequest, String),
}

/// On a node's 503 for a forwarded request whose project it does not own (a move under
/// way): the forwarding node may route the request again.
const MOVING: &str = "x-mailroom-moving";

/// The pause before sending a request on again while its project moves or its owner is
/// unreachable; it grows by this much each try, up to `PAUSE_MAX`.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
const PAUSE_MAX: std::time::Duration = std::time::Duration::from_millis(1000);

/// Passes `req` to the owner and its answer back. The request body is read whole first,
/// up to its route's limit (refused at once when its Content-Length says more), so that
/// it can be sent again when the project moves while it travels; the answer streams
/// through. A move is waited out for up to a lease and two seconds (the old owner's lease
/// runs out by then at the latest).
async fn forward(
    mut req: ServiceRequest,
    state: &AppState,
    cluster: &Arc<ClusterNode>,
    secret: &str,
    project: ProjectId,
    mut target: (String, String),
) -> Result<ServiceResponse<BoxBody>, Failed> {
    // A key that cannot use the route is refused here, before a byte of the body is
    // read: the owner would refuse it anyway, and a `pk_` key from a web page must not
    // make this node buffer an import's worth of body.
    if let Some(key) = bearer_key(&req) {
        if key.kind() == KeyKind::Public && req.path() != "/v1/track" {
            return Ok(req.error_response(ApiError::Forbidden(
                "A public key (pk_) can only be used with POST /v1/track",
            )));
        }
    }
    // The route's own limit: only an import (the API's or the dashboard's form) takes
    // more than a JSON body.
    let limit = if ["/contacts/import", "/app/contacts/import"].contains(&req.path()) {
        state.limits.max_import_bytes
    } else {
        state.limits.max_body_bytes
    };
    let declared = header(&req, "content-length").and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Ok(req.error_response(ApiError::PayloadTooLarge { limit }));
    }
    let mut payload = req.take_payload();
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                return Err(Failed::Unreached(
                    req,
                    format!("reading the request body: {e}"),
                ))
            }
        };
        if body.len() + chunk.len() > limit {
            return Ok(req.error_response(ApiError::PayloadTooLarge { limit }));
        }
        body.extend_from_slice(&chunk);
    }
    let body = body.freeze();
    let deadline =
        std::time::Instant::now() + cluster.identity.lease + std::time::Duration::from_secs(2);
    let mut pause = PAUSE;
    let answer = loop {
        let sent = send(&req, state, cluster, secret, &target, body.clone()).await;
        // Sent again only when the owner surely did nothing with it: it said the
        // project is moving, or no connection was made. A timeout is not retried: the
        // owner may still act on the request.
        let again = match &sent {
            Ok(a) => a.status().as_u16() == 503 && a.headers().contains_key(MOVING),
            Err((_, connect)) => *connect,
        };
        if !again || std::time::Instant::now() + pause >= deadline {
            match sent {
                Ok(a) => break a,
                Err((e, connect)) => {
                    let e = format!("to {} at {}: {e}", target.0, target.1);
                    return Err(if connect {
                        Failed::Unreached(req, e)
                    } else {
                        Failed::Unknown(req, e)
                    });
                }
            }
        }
        cluster.forget_holder(project);
        tokio::time::sleep(pause).await;
        pause = (pause + PAUSE).min(PAUSE_MAX);
        match cluster.route(project).await {
            Ok(Route::Forward { node, url }) => target = (node, url),
            Ok(Route::Serve) => {
                req.set_payload(actix_web::dev::Payload::from(body));
                return Err(Failed::Here(req));
            }
            Err(e) => return Err(Failed::Unreached(req, format!("routing again: {e}"))),
        }
    };
    let (parts, incoming) = answer.into_parts();
    let status = match actix_web::http::StatusCode::from_u16(parts.status.as_u16()) {
        Ok(s) => s,
        Err(e) => return Err(Failed::Unknown(req, format!("status: {e}"))),
    };
    let mut res = HttpResponse::build(status);
    for (name, value) in &parts.headers {
        if HOP_BY_HOP.contains(&name.as_str()) || name.as_str() == MOVING {
            continue;
        }
        res.append_header((name.as_str(), value.as_bytes()));
    }
    let stream = incoming.into_data_stream().map(|chunk| {
        chunk.map_err(|e| actix_web::error::ErrorBadGateway(format!("the owner's answer: {e}")))
    });
    let (http_req, _) = req.into_parts();
    Ok(ServiceResponse::new(http_req, res.streaming(stream)))
}

/// One try: the request's head and `body` to `base`, up to the answer's head.
async fn send(
    req: &ServiceRequest,
    state: &AppState,
    cluster: &ClusterNode,
    secret: &str,
    (to_node, base): &(String, String),
    body: Bytes,
) -> Result<hyper::Response<hyper::body::Incoming>, (String, bool)> {
    let target = format!("{base}{}", target_of(req));
    let mut out = hyper::Request::builder()
        .method(req.method().as_str())
        .uri(&target);
    for (name, value) in req.headers() {
        if HOP_BY_HOP.contains(&name.as_str())
            || [FORWARDED_BY, FORWARD_AUTH, CLIENT_ADDR, BODY_DIGEST].contains(&name.as_str())
        {
            continue;
        }
        out = out.header(name.as_str(), value.as_bytes());
    }
    let client =
        crate::api::client_addr::of_service_request(req, &state.trusted_proxies).to_string();
    let request = Forwarded {
        to: to_node,
        method: req.method().as_str(),
        target: target_of(req),
        authorization: header(req, AUTHORIZATION.as_str()).unwrap_or(""),
        body: &body,
        node: &cluster.identity.node_id,
        client: &client,
    };
    for (name, value) in request.headers(secret) {
        out = out.header(name, value);
    }
    let request = out
        .body(http_body_util::Full::new(body))
        .map_err(|e| (format!("building the request: {e}"), false))?;
    match tokio::time::timeout(
        cluster.identity.forward_timeout,
        state.forward_client.request(request),
    )
    .await
    {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err((e.to_string(), e.is_connect())),
        Err(_) => Err((
            "no answer within cluster.forward_timeout_seconds".into(),
            false,
        )),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    const SECRET: &str = "a-cluster-secret-0123456789abcdefghij";
    const BODY: &[u8] = br#"{"email":"ada@example.com"}"#;

    /// A request forwarded by node-1 for `client`, with `auth` and `body` signed.
    fn forwarded(path: &str, at_ms: i64, client: &str, secret: &str) -> TestRequest {
        let digest = body_digest(BODY);
        let nonce = nonce();
        let signed = Signed {
            to: "node-2",
            method: "POST",
            target: path,
            authorization: "Bearer sk_test",
            body_sha256: &digest,
            at_ms,
            nonce: &nonce,
            node: "node-1",
            client,
        };
        TestRequest::post()
            .uri(path)
            .insert_header((AUTHORIZATION, "Bearer sk_test"))
            .insert_header((FORWARDED_BY, "node-1"))
            .insert_header((FORWARD_AUTH, proof(secret, &signed)))
            .insert_header((BODY_DIGEST, digest))
            .insert_header((CLIENT_ADDR, client))
    }

    #[test]
    fn a_fresh_proof_vouches_for_its_client_and_its_body() {
        let req = forwarded("/contacts?limit=5", now_ms(), "192.0.2.7", SECRET).to_srv_request();
        let v = verify(&req, SECRET, "node-2").expect("a valid proof");
        assert_eq!(v.client, "192.0.2.7".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(hex(&v.body_sha256), body_digest(BODY));
        assert!(
            verify(&req, SECRET, "node-3").is_none(),
            "a proof is good at the node it was made for only"
        );
    }

    #[test]
    fn a_proof_made_with_another_secret_or_too_long_ago_is_refused() {
        let other = forwarded("/contacts", now_ms(), "192.0.2.7", "another-secret");
        assert!(verify(&other.to_srv_request(), SECRET, "node-2").is_none());
        let old = forwarded(
            "/contacts",
            now_ms() - PROOF_WINDOW_MS - 1_000,
            "192.0.2.7",
            SECRET,
        );
        assert!(verify(&old.to_srv_request(), SECRET, "node-2").is_none());
    }

    /// The headers of a valid forwarded request, with one of them changed.
    fn tampered(name: &str, value: &str) -> ServiceRequest {
        let good = forwarded("/contacts", now_ms(), "192.0.2.7", SECRET).to_srv_request();
        let mut req = TestRequest::post().uri("/contacts");
        for (n, v) in good.headers() {
            if n.as_str() != name {
                req = req.insert_header((n.clone(), v.clone()));
            }
        }
        req.insert_header((HeaderName::from_bytes(name.as_bytes()).unwrap(), value))
            .to_srv_request()
    }

    #[test]
    fn a_proof_with_another_path_client_key_or_body_digest_is_refused() {
        let at = now_ms();
        let replayed = |path: &str| forwarded(path, at, "192.0.2.7", SECRET).to_srv_request();
        assert!(verify(&replayed("/contacts"), SECRET, "node-2").is_some());
        let moved = {
            let good = replayed("/contacts");
            let mut req = TestRequest::post().uri("/campaigns");
            for (n, v) in good.headers() {
                req = req.insert_header((n.clone(), v.clone()));
            }
            req.to_srv_request()
        };
        assert!(verify(&moved, SECRET, "node-2").is_none(), "another path");
        assert!(verify(&tampered(CLIENT_ADDR, "198.51.100.1"), SECRET, "node-2").is_none());
        assert!(
            verify(
                &tampered("authorization", "Bearer sk_other"),
                SECRET,
                "node-2"
            )
            .is_none(),
            "another key"
        );
        assert!(
            verify(
                &tampered(BODY_DIGEST, &body_digest(b"{}")),
                SECRET,
                "node-2"
            )
            .is_none(),
            "another body"
        );
    }

    #[actix_web::test]
    async fn a_body_that_is_not_the_one_signed_fails_to_read() {
        use actix_web::FromRequest;
        for (body, ok) in [
            (BODY, true),
            (br#"{"email":"eve@example.com"}"#.as_slice(), false),
        ] {
            let mut req = forwarded("/contacts", now_ms(), "192.0.2.7", SECRET)
                .set_payload(body.to_vec())
                .to_srv_request();
            let v = verify(&req, SECRET, "node-2").expect("a valid proof");
            checked_body(&mut req, v.body_sha256);
            let (http, mut payload) = req.into_parts();
            let read = Bytes::from_request(&http, &mut payload).await;
            assert_eq!(read.is_ok(), ok, "{:?}", read.map(|b| b.len()));
        }
    }
}
