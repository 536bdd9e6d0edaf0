//! Any node answers any request (a cluster, docs/cluster.md): a request for a project this
//! node does not own is passed to the node that does, and its answer passed back as it
//! came. The owner marks every answer to a project's request with `X-Mailroom-Node`.
//!
//! The project of a request is found the way the handlers find it: from the API key
//! (an unknown key first re-reads `keys/`, at most twice a second, so that a key made on
//! another node or by the CLI works at once), from the project id of an admin path
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
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mailroom_actors::model::{ApiKey, ProjectId};
use mailroom_actors::Error;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::AppState;
use crate::cluster::{ClusterNode, Route};

pub const NODE_HEADER: &str = "x-mailroom-node";
pub const FORWARDED_BY: &str = "x-mailroom-forwarded-by";
pub const FORWARD_AUTH: &str = "x-mailroom-forward-auth";

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

/// The proof of `cluster.secret` a forwarded request carries: a digest, so that the
/// secret itself never crosses the network.
pub fn proof(secret: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"mailroom-forward\0")
        .chain_update(secret.as_bytes())
        .finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
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
        if state.projects.get(id).is_err() && !cluster.reload_keys_for_unknown().await {
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
    if cluster.reload_keys_for_unknown().await {
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
        let valid = match (&cluster.identity.secret, header(&req, FORWARD_AUTH)) {
            (Some(secret), Some(given)) => {
                bool::from(proof(secret).as_bytes().ct_eq(given.as_bytes()))
            }
            _ => false,
        };
        if !valid {
            return Ok(req.error_response(ApiError::Forbidden(
                "X-Mailroom-Forwarded-By is for the nodes of a cluster, with the proof of cluster.secret",
            )));
        }
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
            // project is moving). The sender re-routes and tries again.
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

/// Passes `req` to the owner and its answer back. The request body is read whole first
/// (up to the largest body any route takes: the payload is tied to this worker's thread,
/// the client's connections are not), so that it can be sent again when the project
/// moves while it travels; the answer streams through. A move is waited out for up to a
/// lease and two seconds (the old owner's lease runs out by then at the latest).
async fn forward(
    mut req: ServiceRequest,
    state: &AppState,
    cluster: &Arc<ClusterNode>,
    secret: &str,
    project: ProjectId,
    mut target: (String, String),
) -> Result<ServiceResponse<BoxBody>, Failed> {
    let limit = state
        .limits
        .max_body_bytes
        .max(state.limits.max_import_bytes);
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
    let target = match req.uri().path_and_query() {
        Some(pq) => format!("{base}{pq}"),
        None => format!("{base}{}", req.path()),
    };
    let mut out = hyper::Request::builder()
        .method(req.method().as_str())
        .uri(&target);
    for (name, value) in req.headers() {
        if HOP_BY_HOP.contains(&name.as_str())
            || name.as_str() == FORWARDED_BY
            || name.as_str() == FORWARD_AUTH
        {
            continue;
        }
        out = out.header(name.as_str(), value.as_bytes());
    }
    out = out
        .header(FORWARDED_BY, cluster.identity.node_id.as_str())
        .header(FORWARD_AUTH, proof(secret));
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
