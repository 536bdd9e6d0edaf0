//! The resolver shared by sender-domain verification and address verification.
//!
//! It runs hickory-resolver on a small runtime of its own, so a slow or dead nameserver
//! only ever parks tasks there: no actor thread and no HTTP worker waits on DNS I/O,
//! and every lookup is bounded by `dns.timeout_ms` however the nameserver behaves.
//!
//! Two hickory resolvers share the configuration. `Cached` honours TTLs and caches
//! negative answers (for the SOA's minimum TTL); it serves /v1/verify. `Fresh` keeps
//! nothing, because "check my domain now" must see a record published a second ago
//! rather than the NXDOMAIN cached when the user first looked.

mod answer;
pub mod name;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_resolver::config::{
    NameServerConfig, NameServerConfigGroup, Protocol, ResolverConfig, ResolverOpts,
};
use hickory_resolver::error::{ResolveError, ResolveErrorKind};
use hickory_resolver::lookup::Lookup;
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::{Name, TokioAsyncResolver};

pub use answer::{Answer, DnsFailure, Reply};

/// What the resolver needs from `[dns]` in the configuration.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// Empty means the system's resolv.conf.
    pub nameservers: Vec<SocketAddr>,
    /// The bound on one lookup, whatever the nameserver does.
    pub timeout: Duration,
    /// Entries kept by the cached resolver.
    pub cache_size: usize,
}

/// Why a name has no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum NoAddress {
    #[error("looking up {0}")]
    Failed(String, #[source] answer::DnsFailure),
    #[error("{0} has no A or AAAA record")]
    NoRecords(String),
}

/// A DNS setting that stops start-up.
#[derive(Debug, thiserror::Error)]
pub enum DnsSetupError {
    #[error("dns.nameservers: {0:?} is not an ip:port address")]
    Nameserver(String),
    #[error("starting the DNS runtime")]
    Runtime(#[source] std::io::Error),
}

impl DnsConfig {
    /// Parses `ip:port` (or a bare IP, port 53) entries; a bad one is a startup error.
    pub fn parse_nameservers(raw: &[String]) -> Result<Vec<SocketAddr>, DnsSetupError> {
        raw.iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<SocketAddr>()
                    .or_else(|_| {
                        s.parse::<std::net::IpAddr>()
                            .map(|ip| SocketAddr::new(ip, 53))
                    })
                    .map_err(|_| DnsSetupError::Nameserver(s.to_owned()))
            })
            .collect()
    }
}

/// Whether a lookup may be answered from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    Cached,
    Fresh,
}

pub struct Resolver {
    cached: TokioAsyncResolver,
    fresh: TokioAsyncResolver,
    timeout: Duration,
    handle: tokio::runtime::Handle,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Resolver {
    pub fn new(config: &DnsConfig) -> Result<Arc<Resolver>, DnsSetupError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("dns")
            .enable_all()
            .build()
            .map_err(DnsSetupError::Runtime)?;
        let servers = if config.nameservers.is_empty() {
            match hickory_resolver::system_conf::read_system_conf() {
                Ok((system, _)) => system.name_servers().to_vec(),
                // The server still starts; every lookup then fails with a reason.
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the system's DNS configuration; set dns.nameservers");
                    Vec::new()
                }
            }
        } else {
            config
                .nameservers
                .iter()
                .flat_map(|addr| {
                    [Protocol::Udp, Protocol::Tcp].map(|p| {
                        let mut ns = NameServerConfig::new(*addr, p);
                        ns.trust_negative_responses = true;
                        ns
                    })
                })
                .collect()
        };
        let group = NameServerConfigGroup::from(servers);
        let resolver_config = ResolverConfig::from_parts(None, vec![], group);
        let opts = |cache_size: usize| {
            let mut o = ResolverOpts::default();
            o.timeout = config.timeout;
            o.attempts = 1;
            o.cache_size = cache_size;
            o.use_hosts_file = false;
            o.try_tcp_on_error = true;
            o.ndots = 0;
            if cache_size == 0 {
                o.positive_max_ttl = Some(Duration::ZERO);
                o.negative_max_ttl = Some(Duration::ZERO);
            }
            o
        };
        let handle = runtime.handle().clone();
        let (cached, fresh) = {
            let _guard = runtime.enter();
            (
                TokioAsyncResolver::tokio(resolver_config.clone(), opts(config.cache_size.max(1))),
                TokioAsyncResolver::tokio(resolver_config, opts(0)),
            )
        };
        Ok(Arc::new(Resolver {
            cached,
            fresh,
            timeout: config.timeout,
            handle,
            runtime: Some(runtime),
        }))
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// TXT records at `name`, each one's strings joined (a DKIM key is longer than one
    /// 255-byte string, so publishers split it).
    pub async fn txt(&self, name: &str, freshness: Freshness) -> Reply<Vec<String>> {
        self.lookup(name, RecordType::TXT, freshness, |lookup| {
            lookup
                .iter()
                .filter_map(|r| match r {
                    RData::TXT(txt) => Some(
                        txt.txt_data()
                            .iter()
                            .map(|part| String::from_utf8_lossy(part))
                            .collect::<String>(),
                    ),
                    _ => None,
                })
                .collect()
        })
        .await
    }

    /// The exchanges of the MX records at `name` (`.` is a null MX, RFC 7505).
    pub async fn mx(&self, name: &str, freshness: Freshness) -> Reply<Vec<String>> {
        self.lookup(name, RecordType::MX, freshness, |lookup| {
            lookup
                .iter()
                .filter_map(|r| match r {
                    RData::MX(mx) => Some(mx.exchange().to_ascii()),
                    _ => None,
                })
                .collect()
        })
        .await
    }

    /// The targets of the CNAME records at `name` (one, where DNS is well formed).
    pub async fn cname(&self, name: &str, freshness: Freshness) -> Reply<Vec<String>> {
        self.lookup(name, RecordType::CNAME, freshness, |lookup| {
            lookup
                .iter()
                .filter_map(|r| match r {
                    RData::CNAME(c) => Some(c.0.to_ascii()),
                    _ => None,
                })
                .collect()
        })
        .await
    }

    /// How many records of `rtype` exist at `name` (for A, AAAA and NS probes).
    pub async fn count(&self, name: &str, rtype: RecordType, freshness: Freshness) -> Reply<usize> {
        self.lookup(name, rtype, freshness, move |lookup| {
            lookup.iter().filter(|r| r.record_type() == rtype).count()
        })
        .await
    }

    /// The IPv4 and IPv6 addresses of `name` (cached answers); an error says why there
    /// are none.
    pub async fn ips(&self, name: &str) -> Result<Vec<std::net::IpAddr>, NoAddress> {
        let mut ips = Vec::new();
        let mut why = None;
        for rtype in [RecordType::A, RecordType::AAAA] {
            let reply = self
                .lookup(name, rtype, Freshness::Cached, |lookup| {
                    lookup
                        .iter()
                        .filter_map(|r| match r {
                            RData::A(a) => Some(std::net::IpAddr::V4(a.0)),
                            RData::AAAA(a) => Some(std::net::IpAddr::V6(a.0)),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                })
                .await;
            match reply.answer {
                Answer::Found(found) => ips.extend(found),
                Answer::NoRecords { .. } => {}
                Answer::Failed(f) => why = Some(f),
            }
        }
        match (ips.is_empty(), why) {
            (false, _) => Ok(ips),
            (true, Some(why)) => Err(NoAddress::Failed(name.to_owned(), why)),
            (true, None) => Err(NoAddress::NoRecords(name.to_owned())),
        }
    }

    async fn lookup<T, F>(
        &self,
        name: &str,
        rtype: RecordType,
        freshness: Freshness,
        read: F,
    ) -> Reply<T>
    where
        T: Send + 'static + Emptiness,
        F: FnOnce(&Lookup) -> T + Send + 'static,
    {
        let name = match fqdn(name) {
            Ok(n) => n,
            Err(e) => return Reply::failed(DnsFailure::Error(e)),
        };
        let resolver = match freshness {
            Freshness::Cached => self.cached.clone(),
            Freshness::Fresh => self.fresh.clone(),
        };
        let timeout = self.timeout;
        let task = self.handle.spawn(async move {
            match tokio::time::timeout(timeout, resolver.lookup(name, rtype)).await {
                Err(_) => Reply::failed(DnsFailure::Timeout),
                Ok(Ok(lookup)) => {
                    let value = read(&lookup);
                    let valid_until = lookup.valid_until();
                    if value.is_empty() {
                        Reply::new(Answer::NoRecords { name_exists: true }, valid_until)
                    } else {
                        Reply::new(Answer::Found(value), valid_until)
                    }
                }
                Ok(Err(e)) => classify(&e),
            }
        });
        task.await
            .unwrap_or_else(|e| Reply::failed(DnsFailure::Error(format!("lookup task: {e}"))))
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        // Dropping a runtime blocks unless told not to, which panics in async code.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Values that can be "no records of that type" after filtering.
pub trait Emptiness {
    fn is_empty(&self) -> bool;
}

impl<T> Emptiness for Vec<T> {
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

impl Emptiness for usize {
    fn is_empty(&self) -> bool {
        *self == 0
    }
}

fn fqdn(name: &str) -> Result<Name, String> {
    let mut n = Name::from_ascii(name).map_err(|e| format!("{name:?} is not a DNS name: {e}"))?;
    n.set_fqdn(true);
    Ok(n)
}

/// NXDOMAIN and NODATA are answers; a timeout or a server failure tells nothing.
fn classify<T>(e: &ResolveError) -> Reply<T> {
    match e.kind() {
        ResolveErrorKind::NoRecordsFound {
            response_code,
            negative_ttl,
            ..
        } if matches!(
            response_code,
            ResponseCode::NXDomain | ResponseCode::NoError
        ) =>
        {
            let ttl = Duration::from_secs(u64::from(negative_ttl.unwrap_or(0)));
            Reply::new(
                Answer::NoRecords {
                    name_exists: *response_code == ResponseCode::NoError,
                },
                Instant::now() + ttl,
            )
        }
        ResolveErrorKind::NoRecordsFound { response_code, .. } => Reply::failed(DnsFailure::Error(
            format!("the nameserver answered {response_code}"),
        )),
        ResolveErrorKind::Timeout => Reply::failed(DnsFailure::Timeout),
        _ => Reply::failed(DnsFailure::Error(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nameservers_parse_with_a_default_port_and_refuse_garbage() {
        let ok =
            DnsConfig::parse_nameservers(&["127.0.0.1:5353".into(), "10.0.0.1".into(), "".into()])
                .unwrap();
        assert_eq!(
            ok,
            vec![
                "127.0.0.1:5353".parse().unwrap(),
                "10.0.0.1:53".parse().unwrap()
            ]
        );
        assert!(DnsConfig::parse_nameservers(&["dns.example".into()]).is_err());
    }

    #[tokio::test]
    async fn a_nameserver_that_never_answers_gives_a_timeout_within_the_bound() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let resolver = Resolver::new(&DnsConfig {
            nameservers: vec![silent.local_addr().unwrap()],
            timeout: Duration::from_millis(200),
            cache_size: 16,
        })
        .unwrap();
        let started = Instant::now();
        let reply = resolver.mx("example.com", Freshness::Cached).await;
        assert!(
            matches!(reply.answer, Answer::Failed(_)),
            "{:?}",
            reply.answer
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(resolver);
    }
}
