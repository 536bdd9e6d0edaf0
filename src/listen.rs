//! The HTTP port is bound before anything else starts: a port in use is then one clear
//! line with nothing half-started to unwind, and links in emails can follow the port
//! actually bound (port 0 included).

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};

use crate::failure::Failure;

/// As actix-web's own `bind`: pending connections that may queue before an accept.
const BACKLOG: i32 = 1024;

/// Every address `host` resolves to that can be bound (a name such as `localhost` may
/// give both 127.0.0.1 and ::1); an error only when none can.
pub fn bind(host: &str, port: u16) -> Result<Vec<TcpListener>, Failure> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| Failure::caused(format!("server.host {host} does not resolve"), e))?;
    let mut listeners = Vec::new();
    let mut last_error = None;
    for addr in addrs {
        match listener(addr) {
            Ok(l) => listeners.push(l),
            Err(e) => last_error = Some(e),
        }
    }
    match (listeners.is_empty(), last_error) {
        (false, _) => Ok(listeners),
        (true, Some(e)) if e.kind() == ErrorKind::AddrInUse => Err(Failure::said(format!(
            "port {port} on {host} is in use; choose another with --port or \
             MAILROOM__SERVER__PORT (0 picks a free one), or stop what holds it"
        ))),
        (true, Some(e)) => Err(Failure::caused(
            format!(
                "cannot listen on {host}:{port} (choose another with --host and --port, or \
                 MAILROOM__SERVER__HOST and MAILROOM__SERVER__PORT)"
            ),
            e,
        )),
        (true, None) => Err(Failure::said(format!(
            "server.host {host} resolves to no address"
        ))),
    }
}

fn listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // A restarted server must not wait for the old one's connections in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// The base of every unsubscribe, open and click link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinksUrl {
    pub url: String,
    /// Whether it was derived from the listening address (server.public_url unset).
    pub derived: bool,
    /// Derived from a wildcard address (0.0.0.0 or ::), which no reader can reach: the
    /// loopback address stands in, and only this machine can follow the links.
    pub from_wildcard: bool,
}

impl LinksUrl {
    /// `server.public_url` when set, else the first address the server listens on.
    pub fn new(configured: Option<&str>, bound: &[SocketAddr]) -> Result<LinksUrl, Failure> {
        if let Some(url) = configured {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(Failure::said(format!(
                    "server.public_url {url:?} is not an http:// or https:// URL \
                     (e.g. https://mail.example.com); leave it empty to use the listening address"
                )));
            }
            return Ok(LinksUrl {
                url: url.to_owned(),
                derived: false,
                from_wildcard: false,
            });
        }
        let Some(mut addr) = bound.first().copied() else {
            return Err(Failure::said("the server listens on no address"));
        };
        let from_wildcard = addr.ip().is_unspecified();
        if from_wildcard {
            addr.set_ip(match addr.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        Ok(LinksUrl {
            url: format!("http://{addr}"),
            derived: true,
            from_wildcard,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn links_follow_the_bound_port_when_no_public_url_is_set() {
        let links = LinksUrl::new(None, &[addr("127.0.0.1:19082")]).unwrap();
        assert_eq!(links.url, "http://127.0.0.1:19082");
        assert!(links.derived && !links.from_wildcard);
        let v6 = LinksUrl::new(None, &[addr("[::1]:9000")]).unwrap();
        assert_eq!(v6.url, "http://[::1]:9000");
    }

    #[test]
    fn a_wildcard_address_gives_loopback_links_and_says_so() {
        let links = LinksUrl::new(None, &[addr("0.0.0.0:8080")]).unwrap();
        assert_eq!(links.url, "http://127.0.0.1:8080");
        assert!(links.from_wildcard);
    }

    #[test]
    fn a_set_public_url_wins_and_must_be_http() {
        let bound = [addr("127.0.0.1:1")];
        let links = LinksUrl::new(Some("https://mail.example.com"), &bound).unwrap();
        assert_eq!(
            (links.url.as_str(), links.derived),
            ("https://mail.example.com", false)
        );
        let bad = LinksUrl::new(Some("mail.example.com"), &bound).unwrap_err();
        assert!(
            bad.explain().contains("not an http://"),
            "{}",
            bad.explain()
        );
    }

    #[test]
    fn a_port_in_use_is_one_sentence_naming_the_port_and_the_way_out() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = bind("127.0.0.1", port).unwrap_err().explain();
        assert!(
            e.starts_with(&format!("port {port} on 127.0.0.1 is in use")),
            "{e}"
        );
        assert!(e.contains("--port") && e.contains("MAILROOM__SERVER__PORT"));
        assert!(!e.contains('\n'));
    }
}
