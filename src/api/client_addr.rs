//! The address of the client a request comes from. Behind a load balancer or proxy every
//! connection comes from the proxy, so a guard counting connections would lock every
//! client out at once; `server.trusted_proxies` names the proxies whose
//! `X-Forwarded-For` is believed. The client is the rightmost address in that header
//! that is not itself a trusted proxy: a client can put anything at the left of the
//! header, but each trusted proxy appends the address it saw.

use std::net::IpAddr;

use actix_web::dev::ServiceRequest;
use actix_web::{HttpMessage, HttpRequest};

/// The client address of a request whose forwarding proof checked out (in the request's
/// extensions, put there by `http::forward`).
#[derive(Clone, Copy)]
pub struct ForwardedClient(pub std::net::IpAddr);

/// A list of addresses and networks (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Parses each entry as an address or a network; the first that is neither is the
    /// error.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        entries
            .iter()
            .map(|e| {
                let e = e.trim();
                e.parse::<ipnet::IpNet>()
                    .or_else(|_| e.parse::<IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        format!("server.trusted_proxies: {e:?} is neither an address nor a network (CIDR)")
                    })
            })
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a connection from `peer` that carried `forwarded_for` (the values
    /// of every `X-Forwarded-For` header, in order, as bytes: a client can put anything
    /// in front of what the proxy appends, and must not make the proxy's entry unread).
    ///
    /// The entries are read from the right, past each trusted proxy, to the first that
    /// is not one: that is the client. An entry that is not an address (`ip`, `ip:port`
    /// or `[ip]:port`) stops the walk, and the last trusted hop before it is counted:
    /// the client cannot name a fresh address for each guess that way.
    pub fn client<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl Iterator<Item = &'a [u8]>,
    ) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let values: Vec<String> = forwarded_for
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        let mut last_trusted = peer;
        for entry in values.iter().rev().flat_map(|v| v.rsplit(',')) {
            let Some(ip) = address(entry.trim()) else {
                return last_trusted;
            };
            if !self.trusts(ip) {
                return canonical(ip);
            }
            last_trusted = ip;
        }
        last_trusted
    }
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1` or
/// `[2001:db8::1]:4711`.
fn address(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    if let Ok(sock) = entry.parse::<std::net::SocketAddr>() {
        return Some(sock.ip());
    }
    entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse().ok())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn peer(addr: Option<std::net::SocketAddr>) -> IpAddr {
    addr.map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip())
}

/// The client of `req`: the one a forwarding node vouched for, else by the trusted
/// proxies.
pub fn of_request(req: &HttpRequest, trusted: &TrustedProxies) -> IpAddr {
    let vouched = req.extensions().get::<ForwardedClient>().map(|c| c.0);
    resolve(vouched, req.peer_addr(), req.headers(), trusted)
}

/// The same for a request in a middleware.
pub fn of_service_request(req: &ServiceRequest, trusted: &TrustedProxies) -> IpAddr {
    let vouched = req.extensions().get::<ForwardedClient>().map(|c| c.0);
    resolve(vouched, req.peer_addr(), req.headers(), trusted)
}

fn resolve(
    vouched: Option<IpAddr>,
    addr: Option<std::net::SocketAddr>,
    headers: &actix_web::http::header::HeaderMap,
    trusted: &TrustedProxies,
) -> IpAddr {
    vouched.unwrap_or_else(|| {
        trusted.client(
            peer(addr),
            headers.get_all("x-forwarded-for").map(|v| v.as_bytes()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_a_trusted_proxy_names_the_client_and_the_rightmost_untrusted_hop_is_it() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8".into(), "192.0.2.9".into()]).unwrap();
        // A client that is not a proxy cannot name another address.
        assert_eq!(
            trusted.client(ip("198.51.100.7"), [b"203.0.113.1".as_slice()].into_iter()),
            ip("198.51.100.7")
        );
        // Through two trusted proxies; the client forged a left-most entry.
        assert_eq!(
            trusted.client(
                ip("10.0.0.2"),
                [b"6.6.6.6, 203.0.113.5".as_slice(), b"192.0.2.9"].into_iter()
            ),
            ip("203.0.113.5")
        );
        // IPv4-mapped peers are the same address.
        assert_eq!(
            trusted.client(
                ip("::ffff:10.0.0.2"),
                [b"203.0.113.5".as_slice()].into_iter()
            ),
            ip("203.0.113.5")
        );
        // A trusted proxy without the header is the client.
        assert_eq!(
            trusted.client(ip("10.0.0.2"), std::iter::empty()),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn bytes_a_client_puts_in_front_do_not_hide_the_address_the_proxy_appended() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8".into()]).unwrap();
        // nginx appends to the client's own value, in the same header line.
        let line = b"\xff\xfe nonsense, 203.0.113.5";
        assert_eq!(
            trusted.client(ip("10.0.0.2"), [line.as_slice()].into_iter()),
            ip("203.0.113.5")
        );
        // Addresses with ports, as some proxies write them.
        for entry in ["203.0.113.5:4711", "[2001:db8::5]:4711", "[2001:db8::5]"] {
            let want = address(entry).expect(entry);
            assert_eq!(
                trusted.client(ip("10.0.0.2"), [entry.as_bytes()].into_iter()),
                want
            );
        }
        // Garbage where the proxy's entry should be: the proxy is counted, not an
        // address the client picked to the left of it.
        assert_eq!(
            trusted.client(
                ip("10.0.0.2"),
                [b"198.51.100.9, garbage".as_slice()].into_iter()
            ),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn an_entry_that_is_neither_an_address_nor_a_network_is_refused_by_name() {
        let e = TrustedProxies::parse(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(e.contains("10.0.0.0/33"), "{e}");
        assert!(TrustedProxies::parse(&["::1".into(), "fd00::/8".into()]).is_ok());
    }
}
