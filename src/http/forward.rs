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
use mailroom_actors::model::{ApiKey, ProjectId};
use mailroom_actors::Error;
use sha2::Sha256;

use super::error::ApiError;
use super::AppState;
use crate::cluster::{ClusterNode, Route};

pub const NODE_HEADER: &str = "x-mailroom-node";
pub const FORWARDED_BY: &str = "x-mailroom-forwarded-by";
pub const FORWARD_AUTH: &str = "x-mailroom-forward-auth";
/// The address of the client a forwarded request came from, vouched for by the proof:
/// the owner's per-address guards (admin tokens) count the client, not the node.
pub const CLIENT_ADDR: &str = "x-mailroom-client-addr";

/// How far a forwarded request's timestamp may be from the receiver's clock: covers the
/// nodes' clock drift and a request's time in flight, and bounds a replay.
const PROOF_WINDOW_MS: i64 = 30_000;

/// The client address of a request whose forwarding proof checked out (in the request's
/// extensions).
#[derive(Clone, Copy)]
pub struct ForwardedClient(pub std::net::IpAddr);

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

/// What a forwarding proof covers: the request line, when it was sent, by which node,
/// for which client. A captured proof is good for this request only, and for
/// `PROOF_WINDOW_MS`.
struct Signed<'a> {
    method: &'a str,
    target: &'a str,
    at_ms: i64,
    node: &'a str,
    client: &'a str,
}

fn mac(secret: &str, s: &Signed) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    for part in [
        "mailroom-forward",
        s.method,
        s.target,
        &s.at_ms.to_string(),
        s.node,
        s.client,
    ] {
        mac.update(part.as_bytes());
        mac.update(b"\n");
    }
    mac
}

/// The proof of `cluster.secret` a forwarded request carries (`<ms>.<hex HMAC>`): the
/// secret itself never crosses the network.
fn proof(secret: &str, s: &Signed) -> String {
    let tag = mac(secret, s).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}.{hex}", s.at_ms)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Whether `req` carries a valid, fresh proof; the client address it vouches for.
fn verify(req: &ServiceRequest, secret: &str) -> Option<std::net::IpAddr> {
    let (at, tag) = header(req, FORWARD_AUTH)?.split_once('.')?;
    let at_ms: i64 = at.parse().ok()?;
    if (now_ms() - at_ms).abs() > PROOF_WINDOW_MS || tag.len() != 64 {
        return None;
    }
    let tag: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(tag.get(2 * i..2 * i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    let client = header(req, CLIENT_ADDR)?;
    let signed = Signed {
        method: req.method().as_str(),
        target: target_of(req),
        at_ms,
        node: header(req, FORWARDED_BY)?,
        client,
    };
    mac(secret, &signed).verify_slice(&tag).ok()?;
    client.parse().ok()
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
            return state
                .registry
                .links()
                .read(token)
                .map(|(link, _)| link.project());
        }
    }
    if path == "/app" || path.starts_with("/app/") {
        return dashboard_project(req, state);
    }
    if let Some(rest) = path.strip_prefix("/admin/projects/") {
        // Routed only for the holder of the admin token and a project that exists: an
        // anonymous caller must not make this node read the lease table, or take and
        // load a project, for a made-up id. The handler here answers everyone else.
        let expected = state.admin_token.as_deref()?;
        let given = header(req, AUTHORIZATION.as_str())?.strip_prefix("Bearer ")?;
        if !super::admin_guard::token_matches(expected, given.trim()) {
            return None;
        }
        let id: ProjectId = rest.split('/').next()?.parse().ok()?;
        let record = mailroom_actors::projects::record_key(id);
        if state.projects.get(id).is_err() && !cluster.read_through(record).await {
            return None;
        }
        return state.projects.get(id).ok().map(|_| id);
    }
    let bearer = header(req, AUTHORIZATION.as_str())?;
    let (scheme, token) = bearer.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let key = ApiKey::parse(token.trim())?;
    if let Ok(Some(auth)) = state.projects.authenticate(&key) {
        return Some(auth.project.id);
    }
    // Perhaps made a moment ago on another node, or by the CLI.
    let hash = mailroom_actors::projects::api_key_record_key(&key.hash());
    if cluster.read_through(hash).await {
        if let Ok(Some(auth)) = state.projects.authenticate(&key) {
            return Some(auth.project.id);
        }
    }
    None
}

/// The project a dashboard session works on. Sessions live in this node's memory, so a
/// dashboard request is never forwarded: the project is taken here when it falls to this
/// node, and otherwise the engine answers 503 NOT_OWNER (docs/cluster.md, Limits).
fn dashboard_project(req: &ServiceRequest, state: &AppState) -> Option<ProjectId> {
    use crate::dashboard::session::{Principal, COOKIE};
    let id = req
        .headers()
        .get_all(actix_web::http::header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())?;
    let now = mailroom_actors::model::Timestamp::from(state.clock.now()).millis();
    match state.dashboard.sessions.get(&id, now)?.principal {
        Principal::Project { id, .. } => Some(id),
        Principal::Admin { picked } => picked,
    }
}

pub async fn middleware(
    req: ServiceRequest,
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
        let client = cluster
            .identity
            .secret
            .as_deref()
            .and_then(|secret| verify(&req, secret));
        let Some(client) = client else {
            return Ok(req.error_response(ApiError::Forbidden(
                "X-Mailroom-Forwarded-By is for the nodes of a cluster, with a fresh proof of cluster.secret",
            )));
        };
        req.extensions_mut().insert(ForwardedClient(client));
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
    let dashboard = req.path() == "/app" || req.path().starts_with("/app/");
    match route {
        Route::Forward { .. } if dashboard => {
            // The session lives here, the project's data on its owner: the pages would
            // read this node's partial view and show empty lists as if they were true.
            let e = ApiError::Engine(Error::NotOwner { project });
            Ok(unserved(req, &cluster, e))
        }
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
    // The route's own limit: only an import takes more than a JSON body.
    let limit = if req.path() == "/contacts/import" {
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
        let sent = send(&req, state, cluster, secret, &target.1, body.clone()).await;
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
    base: &str,
    body: Bytes,
) -> Result<hyper::Response<hyper::body::Incoming>, (String, bool)> {
    let target = format!("{base}{}", target_of(req));
    let mut out = hyper::Request::builder()
        .method(req.method().as_str())
        .uri(&target);
    for (name, value) in req.headers() {
        if HOP_BY_HOP.contains(&name.as_str())
            || [FORWARDED_BY, FORWARD_AUTH, CLIENT_ADDR].contains(&name.as_str())
        {
            continue;
        }
        out = out.header(name.as_str(), value.as_bytes());
    }
    let client = req
        .peer_addr()
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip())
        .to_string();
    let signed = Signed {
        method: req.method().as_str(),
        target: target_of(req),
        at_ms: now_ms(),
        node: &cluster.identity.node_id,
        client: &client,
    };
    out = out
        .header(FORWARDED_BY, cluster.identity.node_id.as_str())
        .header(FORWARD_AUTH, proof(secret, &signed))
        .header(CLIENT_ADDR, client.as_str());
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

    fn forwarded(path: &str, at_ms: i64, client: &str, secret: &str) -> ServiceRequest {
        let signed = Signed {
            method: "POST",
            target: path,
            at_ms,
            node: "node-1",
            client,
        };
        TestRequest::post()
            .uri(path)
            .insert_header((FORWARDED_BY, "node-1"))
            .insert_header((FORWARD_AUTH, proof(secret, &signed)))
            .insert_header((CLIENT_ADDR, client))
            .to_srv_request()
    }

    #[test]
    fn a_fresh_proof_vouches_for_its_client() {
        let req = forwarded("/contacts?limit=5", now_ms(), "192.0.2.7", SECRET);
        assert_eq!(verify(&req, SECRET), Some("192.0.2.7".parse().unwrap()));
    }

    #[test]
    fn a_proof_made_with_another_secret_or_too_long_ago_is_refused() {
        let other = forwarded("/contacts", now_ms(), "192.0.2.7", "another-secret");
        assert_eq!(verify(&other, SECRET), None);
        let old = forwarded(
            "/contacts",
            now_ms() - PROOF_WINDOW_MS - 1_000,
            "192.0.2.7",
            SECRET,
        );
        assert_eq!(verify(&old, SECRET), None);
    }

    #[test]
    fn a_proof_replayed_on_another_path_or_for_another_client_is_refused() {
        let at = now_ms();
        let signed = Signed {
            method: "POST",
            target: "/contacts",
            at_ms: at,
            node: "node-1",
            client: "192.0.2.7",
        };
        let replayed = |path: &str, client: &str| {
            TestRequest::post()
                .uri(path)
                .insert_header((FORWARDED_BY, "node-1"))
                .insert_header((FORWARD_AUTH, proof(SECRET, &signed)))
                .insert_header((CLIENT_ADDR, client))
                .to_srv_request()
        };
        assert!(verify(&replayed("/contacts", "192.0.2.7"), SECRET).is_some());
        assert_eq!(verify(&replayed("/campaigns", "192.0.2.7"), SECRET), None);
        assert_eq!(verify(&replayed("/contacts", "198.51.100.1"), SECRET), None);
    }
}
