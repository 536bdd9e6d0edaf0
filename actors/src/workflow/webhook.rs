//! A WEBHOOK step's request. Tenants name the URL, so the request must not become a way
//! into the operator's network: the host is resolved here, every address it resolves
//! to is checked (loopback, private, link-local, unique-local, CGNAT, multicast and
//! unspecified addresses are refused unless `workflows.allow_private_webhooks`), and the
//! connection goes to a checked address, never to a name resolved again elsewhere.
//! Redirects are not followed: the step records the 3xx status like any other.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::dns::Resolver;

pub struct WebhookClient {
    resolver: Arc<Resolver>,
    allow_private: bool,
    timeout: Duration,
    tls: TlsConnector,
}

/// Why a webhook got no answer. Its text goes into the execution's history, which the
/// tenant reads: no internal address is named in it.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the URL does not parse")]
    Url(#[source] hyper::http::uri::InvalidUri),
    #[error("only http:// and https:// URLs are called")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    /// A name that does not resolve and one that resolves to a private address read the
    /// same: otherwise the history would tell the tenant which internal names exist.
    #[error("the host has no public address (private, loopback and link-local addresses are refused unless workflows.allow_private_webhooks is set)")]
    Resolve(#[source] crate::dns::NoAddress),
    #[error("the host has no public address (private, loopback and link-local addresses are refused unless workflows.allow_private_webhooks is set)")]
    Private(String),
    #[error("no address to connect to")]
    NoAddress,
    /// Neither the address nor the OS's reason is told: which ports answer, and how,
    /// would map a network for the tenant. `detail` has them for the server's log.
    #[error("could not connect")]
    Connect(SocketAddr, std::io::Error),
    #[error("building the request")]
    Request(#[source] hyper::http::Error),
    #[error("{0} is not a name TLS can verify")]
    TlsName(String),
    #[error("TLS with {0}")]
    Tls(String, #[source] std::io::Error),
    #[error("HTTP handshake")]
    Handshake(#[source] hyper::Error),
    #[error("sending the request")]
    Send(#[source] hyper::Error),
    #[error("the connection closed before the request went out")]
    Closed,
    #[error("no answer within {0} s")]
    Timeout(f64),
}

impl WebhookError {
    /// The whole cause, addresses included: for the server's log, not the history.
    pub fn detail(&self) -> String {
        match self {
            WebhookError::Connect(addr, e) => format!("connecting to {addr}: {e}"),
            WebhookError::Private(host) => format!("{host} is a private address"),
            other => crate::error::chain(other),
        }
    }
}

/// Whether a WEBHOOK step's URL can be called: checked when the workflow is saved, so
/// that a URL that cannot parse is a 422 then, not a failed step later.
pub fn check_url(url: &str) -> Result<(), WebhookError> {
    target(url).map(|_| ())
}

/// The parts of a URL a request needs.
struct Target {
    https: bool,
    host: String,
    port: u16,
    path: String,
}

fn target(url: &str) -> Result<Target, WebhookError> {
    let uri: hyper::Uri = url.parse().map_err(WebhookError::Url)?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(WebhookError::Scheme),
    };
    let host = uri
        .host()
        .ok_or(WebhookError::NoHost)?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    if host.is_empty() {
        return Err(WebhookError::NoHost);
    }
    Ok(Target {
        https,
        port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
        path: uri
            .path_and_query()
            .map_or("/".to_owned(), |p| p.as_str().to_owned()),
        host,
    })
}

/// Whether an address is inside the operator's network or otherwise not the public
/// internet.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                // 100.64.0.0/10, carrier-grade NAT (shared address space).
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                // 198.18.0.0/15, benchmarking.
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                // 192.0.0.0/24, IETF protocol assignments.
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            // IPv4-mapped and IPv4-compatible forms are their IPv4 address.
            if let Some(v4) = v6.to_ipv4() {
                if !v6.is_loopback() && !v6.is_unspecified() {
                    return is_private(IpAddr::V4(v4));
                }
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // fc00::/7 unique local, fe80::/10 link local.
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                // fec0::/10, the old site-local.
                || (s[0] & 0xffc0) == 0xfec0
                // NAT64 (64:ff9b::/96, 64:ff9b:1::/48), 6to4 (2002::/16) and Teredo
                // (2001::/32) can reach IPv4 space inside.
                || (s[0] == 0x64 && s[1] == 0xff9b)
                || s[0] == 0x2002
                || (s[0] == 0x2001 && s[1] == 0)
                // 100::/64, discard.
                || (s[0] == 0x100 && s[1] == 0 && s[2] == 0 && s[3] == 0)
        }
    }
}

/// The root certificates in `pem`; an error says what is not one, or that none is.
pub fn roots_from_pem(pem: &[u8]) -> Result<RootCertStore, String> {
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("not a PEM certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("not a usable root certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("holds no PEM certificate".into());
    }
    Ok(roots)
}

impl WebhookClient {
    pub fn new(resolver: Arc<Resolver>, allow_private: bool, timeout: Duration) -> Self {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        WebhookClient::with_roots(resolver, allow_private, timeout, roots)
    }

    /// A client that also trusts the roots of `pem` (a TLS-inspecting proxy's CA);
    /// an error names what in the file is not a certificate.
    pub fn trusting(
        resolver: Arc<Resolver>,
        allow_private: bool,
        timeout: Duration,
        pem: &[u8],
    ) -> Result<Self, String> {
        let mut roots = roots_from_pem(pem)?;
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Ok(WebhookClient::with_roots(
            resolver,
            allow_private,
            timeout,
            roots,
        ))
    }

    fn with_roots(
        resolver: Arc<Resolver>,
        allow_private: bool,
        timeout: Duration,
        roots: RootCertStore,
    ) -> Self {
        let config = ClientConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .unwrap_or_else(|_| {
            ClientConfig::builder()
                .with_root_certificates(RootCertStore::empty())
                .with_no_client_auth()
        });
        WebhookClient {
            resolver,
            allow_private,
            timeout,
            tls: TlsConnector::from(Arc::new(config)),
        }
    }

    /// Makes the request on a connection of its own; answers the status code, or why
    /// there is none.
    pub async fn call(
        &self,
        url: &str,
        method: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<u16, WebhookError> {
        self.call_in(&mut Session::default(), url, method, headers, body)
            .await
    }

    /// Like `call`, on `session`'s connection when it is one to the same origin and
    /// still open (and keeping this one there for the next call when the answer leaves
    /// it open).
    pub(crate) async fn call_in(
        &self,
        session: &mut Session,
        url: &str,
        method: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<u16, WebhookError> {
        self.exchange(session, url, method, headers, body, 0)
            .await
            .map(|(status, _)| status)
    }

    /// A GET that keeps at most `max_bytes` of the answer's body (a certificate to
    /// read): the status, and the body when it was no longer than that.
    pub async fn fetch(
        &self,
        url: &str,
        max_bytes: usize,
    ) -> Result<(u16, Option<Vec<u8>>), WebhookError> {
        let mut once = Session::default();
        self.exchange(&mut once, url, "GET", &[], Vec::new(), max_bytes)
            .await
    }

    async fn exchange(
        &self,
        session: &mut Session,
        url: &str,
        method: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
        keep: usize,
    ) -> Result<(u16, Option<Vec<u8>>), WebhookError> {
        // The kept connection is taken out for the call and put back only by a call
        // that ended well, so a timeout or an error never leaves one half used.
        let kept = session.kept.take();
        match tokio::time::timeout(
            self.timeout,
            self.call_inner(kept, url, method, headers, Bytes::from(body), keep),
        )
        .await
        {
            Ok(Ok((status, body, open))) => {
                session.kept = open;
                Ok((status, body))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(WebhookError::Timeout(self.timeout.as_secs_f64())),
        }
    }

    async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, WebhookError> {
        let ips = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self
                .resolver
                .ips(host)
                .await
                .map_err(WebhookError::Resolve)?,
        };
        if self.allow_private {
            return Ok(ips);
        }
        let public: Vec<IpAddr> = ips.iter().copied().filter(|ip| !is_private(*ip)).collect();
        if public.is_empty() {
            // The addresses are not named: the history is the tenant's to read, and the
            // operator's internal names are not.
            return Err(WebhookError::Private(host.to_owned()));
        }
        Ok(public)
    }

    /// The request, on the kept connection when it goes to the same origin and is still
    /// open, else on a new one; answers the connection when it may carry another.
    async fn call_inner(
        &self,
        kept: Option<Kept>,
        url: &str,
        method: &str,
        headers: &[(String, String)],
        body: Bytes,
        keep: usize,
    ) -> Result<(u16, Option<Vec<u8>>, Option<Kept>), WebhookError> {
        let t = target(url)?;
        let origin = (t.https, t.host.clone(), t.port);
        let mut req = request(&t, method, headers, body)?;
        let reusable = kept.filter(|(o, c)| *o == origin && c.made.elapsed() < MAX_AGE);
        if let Some((o, mut conn)) = reusable {
            if conn.sender.ready().await.is_ok() {
                match send_on(&mut conn, req, keep).await {
                    Ok((status, got, open)) => return Ok((status, got, open.then_some((o, conn)))),
                    // The endpoint closed the kept connection before the request was
                    // written: it goes on a new one. Once written, a failure is the
                    // attempt's (it may have been acted on), not sent again here.
                    Err(Unsent(Some(back))) => req = *back,
                    Err(Unsent(None)) => return Err(WebhookError::Closed),
                    Err(Sent(e)) => return Err(e),
                }
            }
        }
        let mut conn = self.connect(&t).await?;
        match send_on(&mut conn, req, keep).await {
            Ok((status, got, open)) => Ok((status, got, open.then_some((origin, conn)))),
            Err(Sent(e)) => Err(e),
            Err(Unsent(_)) => Err(WebhookError::Closed),
        }
    }

    /// A new connection to a checked address of `t`'s host (over TLS for https), with
    /// its driver running until the connection is dropped.
    async fn connect(&self, t: &Target) -> Result<Conn, WebhookError> {
        let ips = self.addresses(&t.host).await?;
        let mut last = WebhookError::NoAddress;
        let mut stream = None;
        for ip in ips.iter().take(4) {
            match TcpStream::connect(SocketAddr::new(*ip, t.port)).await {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = WebhookError::Connect(SocketAddr::new(*ip, t.port), e),
            }
        }
        let stream = stream.ok_or(last)?;
        let _ = stream.set_nodelay(true);
        if t.https {
            let name = ServerName::try_from(t.host.clone())
                .map_err(|_| WebhookError::TlsName(t.host.clone()))?;
            let tls = self
                .tls
                .connect(name, stream)
                .await
                .map_err(|e| WebhookError::Tls(t.host.clone(), e))?;
            open(TokioIo::new(tls)).await
        } else {
            open(TokioIo::new(stream)).await
        }
    }
}

/// A connection kept between calls (`WebhookClient::call_in`): the event deliverer's
/// lanes each send one endpoint's deliveries one after another, and a new connection
/// for each cost a TCP (and TLS) handshake on both sides. Its address was checked when
/// it was made, and it is used again only for the same scheme, host and port.
#[derive(Default)]
pub(crate) struct Session {
    kept: Option<Kept>,
}

impl Session {
    /// Whether it holds a connection the last answer left open.
    pub(crate) fn is_open(&self) -> bool {
        self.kept
            .as_ref()
            .is_some_and(|(_, c)| !c.sender.is_closed())
    }
}

/// How long a kept connection is used at most, however busy: its host's name is then
/// resolved (and its addresses checked) again.
const MAX_AGE: Duration = Duration::from_secs(300);

/// Why `send_on` got no answer: before the request was written (it comes back, when
/// hyper gives it back), or after.
enum Failed {
    Unsent(Option<Box<Request<Full<Bytes>>>>),
    Sent(WebhookError),
}
use Failed::{Sent, Unsent};

/// Scheme (https or not), host and port.
type Origin = (bool, String, u16);
type Kept = (Origin, Conn);

/// A connection: its sender, and the task that drives it, stopped when the connection
/// is dropped (a request given up on, or a session that ends), so that an endpoint that
/// never answers holds nothing after its timeout.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    made: std::time::Instant,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn request(
    t: &Target,
    method: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<Request<Full<Bytes>>, WebhookError> {
    let host = match t.host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{}]", t.host),
        _ => t.host.clone(),
    };
    let host_header = match t.port {
        80 if !t.https => host,
        443 if t.https => host,
        port => format!("{host}:{port}"),
    };
    let mut req = Request::builder()
        .method(method)
        .uri(t.path.as_str())
        .header("host", host_header)
        .header(
            "user-agent",
            concat!("Mailroom/", env!("CARGO_PKG_VERSION")),
        )
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    req.body(Full::new(body)).map_err(WebhookError::Request)
}

/// The HTTP/1.1 handshake on `io`; the connection's driver runs on its own task.
async fn open<T>(io: T) -> Result<Conn, WebhookError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(WebhookError::Handshake)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Conn {
        sender,
        driver,
        made: std::time::Instant::now(),
    })
}

/// Sends `req` and reads the answer: its status, its body when `keep` bytes held it
/// (reading stops past `keep`, or past 64 KiB when nothing is kept), and whether the
/// connection can carry another request (the body was read to its end, and neither
/// side of it said the connection closes).
async fn send_on(
    conn: &mut Conn,
    req: Request<Full<Bytes>>,
    keep: usize,
) -> Result<(u16, Option<Vec<u8>>, bool), Failed> {
    let res = match conn.sender.try_send_request(req).await {
        Ok(res) => res,
        Err(mut e) => {
            return Err(match e.take_message() {
                Some(back) => Unsent(Some(Box::new(back))),
                None if e.error().is_canceled() => Unsent(None),
                None => Sent(WebhookError::Send(e.into_error())),
            })
        }
    };
    let status = res.status().as_u16();
    let closes = res.version() < hyper::Version::HTTP_11
        || res
            .headers()
            .get_all(hyper::header::CONNECTION)
            .iter()
            .any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.to_ascii_lowercase().contains("close"))
            });
    let mut body = res.into_body();
    // Kept: read one frame past the limit to tell a body that fits from one that does
    // not. Not kept: stop at 64 KiB, as before.
    let limit = if keep > 0 { keep + 1 } else { 64 * 1024 };
    let mut read = 0usize;
    let mut kept = Vec::new();
    let mut whole = false;
    while read < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                let data = frame.data_ref().map_or(&[][..], |d| &d[..]);
                read += data.len();
                if keep > 0 && read <= keep {
                    kept.extend_from_slice(data);
                }
            }
            None => {
                whole = true;
                break;
            }
            Some(Err(_)) => break,
        }
    }
    let open = whole && !closes && !conn.sender.is_closed();
    Ok((
        status,
        (keep > 0 && whole && read <= keep).then_some(kept),
        open,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_link_local_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "2002:7f00:1::1",
            "192.0.0.192",
            "fec0::1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_url_gives_its_host_port_and_path() {
        let t = target("https://hooks.example.com/a/b?c=1").unwrap();
        assert_eq!(
            (t.https, t.host.as_str(), t.port, t.path.as_str()),
            (true, "hooks.example.com", 443, "/a/b?c=1")
        );
        let t = target("http://[::1]:8080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("::1", 8080, "/")
        );
        assert!(target("ftp://x").is_err());
    }

    #[test]
    fn a_url_that_cannot_parse_or_has_no_host_is_refused() {
        for url in ["http://[::1", "http://:80/", "http://a b/", "https://"] {
            assert!(check_url(url).is_err(), "{url}");
        }
        assert!(check_url("http://[::1]:8080/hook").is_ok());
    }

    #[test]
    fn a_failed_connection_names_neither_address_nor_os_reason_except_in_the_detail() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = WebhookError::Connect("10.0.0.7:6379".parse().unwrap(), refused);
        assert_eq!(crate::error::chain(&e), "could not connect");
        assert!(e.detail().contains("10.0.0.7:6379"), "{}", e.detail());
    }
}
