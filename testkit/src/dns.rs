//! A real DNS server on loopback: hickory-server with one in-memory authority for the
//! root zone, so every name a test publishes resolves and every other name gets an
//! authoritative NXDOMAIN. Records can be changed while it runs. Point Mailroom at it
//! with `MAILROOM__DNS__NAMESERVERS=<addr()>`. For fault injection it can stop answering
//! (`set_silent`) and answer again, on the same port.

use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::authority::{Catalog, ZoneType};
use hickory_server::proto::rr::rdata::{A, CNAME, MX, NS, SOA, TXT};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordType, RrKey};
use hickory_server::store::in_memory::InMemoryAuthority;
use hickory_server::ServerFuture;

const TTL: u32 = 60;
/// The SOA minimum: how long resolvers may cache a negative answer. Long on purpose:
/// domain checks must not be fooled by a cached "no such record".
const NEGATIVE_TTL: u32 = 60;

/// The stop signal and the task of the server that answers on the kept sockets.
type Serving = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

pub struct TestDns {
    addr: SocketAddr,
    authority: Arc<InMemoryAuthority>,
    serial: AtomicU32,
    runtime: Option<tokio::runtime::Runtime>,
    /// The bound sockets. The server answers on clones of them; these stay open while it
    /// is silent, so the port stays taken and queries are received, never refused.
    udp: std::net::UdpSocket,
    tcp: std::net::TcpListener,
    /// The server answering; None while silent.
    serving: Mutex<Option<Serving>>,
}

impl TestDns {
    /// Serves on a free port of 127.0.0.1, over UDP and TCP.
    pub fn start() -> TestDns {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("DNS test runtime");
        let root = Name::root();
        let mut authority = InMemoryAuthority::empty(root.clone(), ZoneType::Primary, false);
        let ns = name("ns.test");
        let soa = SOA::new(
            ns.clone(),
            name("hostmaster.test"),
            1,
            60,
            60,
            600,
            NEGATIVE_TTL,
        );
        authority.upsert_mut(
            Record::from_rdata(root.clone(), NEGATIVE_TTL, RData::SOA(soa)),
            1,
        );
        authority.upsert_mut(Record::from_rdata(root.clone(), TTL, RData::NS(NS(ns))), 1);
        let authority = Arc::new(authority);
        let (udp, tcp) = runtime.block_on(async {
            loop {
                let udp = tokio::net::UdpSocket::bind("127.0.0.1:0")
                    .await
                    .expect("udp");
                let port = udp.local_addr().unwrap().port();
                if let Ok(tcp) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
                    // Non-blocking std sockets, as ServerFuture's *_std registrations want.
                    break (
                        udp.into_std().expect("the UDP socket"),
                        tcp.into_std().expect("the TCP listener"),
                    );
                }
            }
        });
        let addr = udp.local_addr().expect("the DNS server's address");
        let dns = TestDns {
            addr,
            authority,
            serial: AtomicU32::new(2),
            runtime: Some(runtime),
            udp,
            tcp,
            serving: Mutex::new(None),
        };
        let serving = dns.serve();
        *dns.serving.lock().unwrap() = Some(serving);
        dns
    }

    /// Starts a server for the zone on clones of the kept sockets.
    fn serve(&self) -> Serving {
        let mut catalog = Catalog::new();
        catalog.upsert(
            LowerName::new(&Name::root()),
            Box::new(self.authority.clone()),
        );
        let udp = self.udp.try_clone().expect("a clone of the UDP socket");
        let tcp = self.tcp.try_clone().expect("a clone of the TCP listener");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        // Registering sockets needs the runtime's context, not a task of it.
        let _context = self.rt().enter();
        let mut server = ServerFuture::new(catalog);
        server.register_socket_std(udp).expect("serve DNS over UDP");
        server
            .register_listener_std(tcp, Duration::from_secs(5))
            .expect("serve DNS over TCP");
        let task = self.rt().spawn(async move {
            let stop_now = tokio::select! {
                _ = server.block_until_done() => false,
                _ = stopped => true,
            };
            if stop_now {
                let _ = server.shutdown_gracefully().await;
            }
        });
        (stop, task)
    }

    /// Silent, the server still takes every query, over UDP and TCP, and answers none:
    /// a nameserver that hangs, not one that is down (nothing is refused, so clients
    /// wait out their timeouts). Records can still be changed meanwhile.
    /// `set_silent(false)` answers again on the same port; queries that came in the
    /// silence may then get late answers, which their clients no longer wait for.
    pub fn set_silent(&self, silent: bool) {
        let mut serving = self.serving.lock().unwrap();
        if silent {
            if let Some((stop, task)) = serving.take() {
                let _ = stop.send(());
                // Returns once the server's socket tasks have ended: new queries go unread.
                let _ = self.rt().block_on(task);
            }
        } else if serving.is_none() {
            *serving = Some(self.serve());
        }
    }

    /// `127.0.0.1:<port>`, for MAILROOM__DNS__NAMESERVERS.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    fn upsert(&self, owner: &str, rdata: RData) {
        self.upsert_ttl(owner, rdata, TTL);
    }

    fn upsert_ttl(&self, owner: &str, rdata: RData, ttl: u32) {
        let record = Record::from_rdata(name(owner), ttl, rdata);
        let serial = self.serial.fetch_add(1, Ordering::SeqCst);
        let authority = self.authority.clone();
        let added = self
            .rt()
            .block_on(async move { authority.upsert(record, serial).await });
        assert!(added, "publishing a record at {owner}");
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("running")
    }

    /// Replaces every TXT record at `owner`. Values longer than 255 bytes are split
    /// into several strings, as DNS operators publish DKIM keys.
    pub fn set_txt(&self, owner: &str, values: &[&str]) {
        self.remove(owner, RecordType::TXT);
        for v in values {
            let parts = v
                .as_bytes()
                .chunks(255)
                .map(|c| String::from_utf8(c.to_vec()).unwrap())
                .collect();
            self.upsert(owner, RData::TXT(TXT::new(parts)));
        }
    }

    pub fn remove_txt(&self, owner: &str) {
        self.remove(owner, RecordType::TXT);
    }

    pub fn remove_mx(&self, owner: &str) {
        self.remove(owner, RecordType::MX);
    }

    fn remove(&self, owner: &str, rtype: RecordType) {
        let key = RrKey::new(LowerName::new(&name(owner)), rtype);
        let authority = self.authority.clone();
        self.rt().block_on(async move {
            authority.records_mut().await.remove(&key);
        });
    }

    pub fn add_mx(&self, owner: &str, exchange: &str) {
        let exchange = if exchange == "." {
            Name::root()
        } else {
            name(exchange)
        };
        self.upsert(owner, RData::MX(MX::new(10, exchange)));
    }

    /// Replaces the CNAME at `owner` with one to `target`.
    pub fn set_cname(&self, owner: &str, target: &str) {
        self.remove(owner, RecordType::CNAME);
        self.upsert(owner, RData::CNAME(CNAME(name(target))));
    }

    pub fn add_a(&self, owner: &str, ip: Ipv4Addr) {
        self.upsert(owner, RData::A(A(ip)));
    }

    /// A mail domain: MX and a website.
    pub fn add_mail_domain(&self, domain: &str) {
        self.add_mail_domain_with_ttl(domain, TTL);
    }

    pub fn add_mail_domain_with_ttl(&self, domain: &str, ttl: u32) {
        let mx = MX::new(10, name(&format!("mx.{domain}")));
        self.upsert_ttl(domain, RData::MX(mx), ttl);
        self.upsert_ttl(domain, RData::A(A(Ipv4Addr::new(192, 0, 2, 10))), ttl);
    }
}

impl Drop for TestDns {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn name(s: &str) -> Name {
    let mut n = Name::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    n.set_fqdn(true);
    n
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use hickory_server::proto::op::{Message, Query};

    use super::*;

    /// Whether an A query for `host` over UDP gets an answer within 500 ms.
    fn answered(dns: &TestDns, host: &str) -> bool {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut query = Message::new();
        query.set_id(7);
        query.set_recursion_desired(true);
        query.add_query(Query::query(name(host), RecordType::A));
        socket.send_to(&query.to_vec().unwrap(), dns.addr).unwrap();
        let mut buf = [0u8; 512];
        socket.recv_from(&mut buf).is_ok()
    }

    #[test]
    fn a_silent_server_takes_queries_and_answers_none_until_it_speaks_again() {
        let dns = TestDns::start();
        dns.add_a("host.test", Ipv4Addr::new(192, 0, 2, 1));
        assert!(answered(&dns, "host.test"), "answering");
        dns.set_silent(true);
        assert!(!answered(&dns, "host.test"), "silent");
        dns.add_a("other.test", Ipv4Addr::new(192, 0, 2, 2));
        dns.set_silent(false);
        assert!(
            answered(&dns, "other.test"),
            "answering again, on the same port"
        );
    }
}
