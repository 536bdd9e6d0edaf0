//! What each scenario sends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::server::Server;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// GET /health: a constant answer through the same middleware (the baseline).
    Baseline,
    /// POST /contacts: durable upserts, half of fresh emails and half of existing ones.
    Contacts,
    /// POST /v1/send: one recipient each, durably queued; delivery is counted at the SMTP server.
    Send,
    /// POST /v1/track: durable contact upsert plus event.
    Track,
    /// POST /v1/verify against a warm DNS cache.
    Verify,
}

impl Scenario {
    pub fn parse(s: &str) -> Option<Scenario> {
        match s.trim() {
            "baseline" | "health" => Some(Scenario::Baseline),
            "contacts" => Some(Scenario::Contacts),
            "send" => Some(Scenario::Send),
            "track" => Some(Scenario::Track),
            "verify" => Some(Scenario::Verify),
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline GET /health",
            Scenario::Contacts => "POST /contacts (upsert)",
            Scenario::Send => "POST /v1/send (accepted)",
            Scenario::Track => "POST /v1/track",
            Scenario::Verify => "POST /v1/verify (warm)",
        }
    }

    pub fn prepare(&self, server: &Server) -> Arc<Ctx> {
        self.prepare_with_key(&server.secret_key)
    }

    pub fn prepare_with_key(&self, secret_key: &str) -> Arc<Ctx> {
        Arc::new(Ctx {
            scenario: *self,
            auth: format!("Bearer {secret_key}"),
            fresh: AtomicU64::new(0),
            contacts: None,
        })
    }

    /// Like `prepare`, with upserts and sends kept to `contacts` addresses (a soak
    /// whose data set does not grow).
    pub fn prepare_bounded(&self, server: &Server, contacts: u64) -> Arc<Ctx> {
        Arc::new(Ctx {
            scenario: *self,
            auth: format!("Bearer {}", server.secret_key),
            fresh: AtomicU64::new(0),
            contacts: Some(contacts.max(1)),
        })
    }
}

/// Shared by every connection of one scenario run.
pub struct Ctx {
    scenario: Scenario,
    auth: String,
    fresh: AtomicU64,
    /// When set, the number of addresses upserts and sends go to.
    contacts: Option<u64>,
}

pub struct Req {
    pub method: &'static str,
    pub path: &'static str,
    pub auth: Option<String>,
    pub body: Option<String>,
}

impl Ctx {
    /// The `n`th request of one connection; `seed` varies per connection.
    pub fn request(&self, seed: u64, n: u64) -> Req {
        match self.scenario {
            Scenario::Baseline => Req {
                method: "GET",
                path: "/health",
                auth: None,
                body: None,
            },
            Scenario::Track => Req {
                method: "POST",
                path: "/v1/track",
                auth: Some(self.auth.clone()),
                body: Some(format!(
                    r#"{{"email":"user{}@bench.example.com","event":"signed-in","data":{{"n":{n}}}}}"#,
                    mix(seed ^ n) % 50_000
                )),
            },
            Scenario::Verify => Req {
                method: "POST",
                path: "/v1/verify",
                auth: Some(self.auth.clone()),
                body: Some(format!(r#"{{"email":"user{}@gmail.com"}}"#, n % 1000)),
            },
            Scenario::Send => Req {
                method: "POST",
                path: "/v1/send",
                auth: Some(self.auth.clone()),
                body: Some(format!(
                    r#"{{"to":"user{}@example.com","from":"bench@acme.test","subject":"Hello {{{{name ?? \"there\"}}}}","body":"<p>Bench {n}</p>"}}"#,
                    self.fresh.fetch_add(1, Ordering::Relaxed) % self.contacts.unwrap_or(u64::MAX)
                )),
            },
            Scenario::Contacts => {
                let made = self.fresh.load(Ordering::Relaxed);
                let id = if let Some(k) = self.contacts {
                    mix(seed ^ n) % k
                } else if n.is_multiple_of(2) || made == 0 {
                    self.fresh.fetch_add(1, Ordering::Relaxed)
                } else {
                    mix(seed ^ n) % made
                };
                Req {
                    method: "POST",
                    path: "/contacts",
                    auth: Some(self.auth.clone()),
                    body: Some(format!(
                        r#"{{"email":"user{id}@bench.example.com","data":{{"plan":"pro","n":{n}}}}}"#
                    )),
                }
            }
        }
    }
}

/// A cheap integer hash (splitmix64) for picking existing records.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}
