//! What DNS says about an address's domain, and a cache of it keyed by domain.
//!
//! One verification asks six questions (MX, A, AAAA, NS, and A/AAAA for `www.`),
//! concurrently, from the caching resolver. The conclusions are then cached here until
//! the earliest of those answers' TTLs (or negative TTLs) runs out, so a warm
//! verification is one hash lookup under a read lock. Conclusions drawn from a failed
//! lookup are never cached.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Instant;

use hickory_resolver::proto::rr::RecordType;

use crate::dns::{Answer, DnsFailure, Freshness, Reply, Resolver};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DomainFacts {
    /// The name exists: it has MX, A, AAAA or NS records, or answers NODATA.
    pub exists: bool,
    /// At least one MX that is not the null MX.
    pub has_mx: bool,
    /// `MX 0 .` (RFC 7505): the domain says it accepts no mail.
    pub null_mx: bool,
    pub has_website: bool,
}

pub struct Probe {
    pub facts: DomainFacts,
    /// The first lookup that failed, if any: the facts are then incomplete.
    pub failure: Option<DnsFailure>,
}

pub async fn probe(resolver: &Resolver, domain: &str) -> (Probe, Instant) {
    let www = format!("www.{domain}");
    let c = Freshness::Cached;
    let (mx, a, aaaa, ns, www_a, www_aaaa) = futures_util::join!(
        resolver.mx(domain, c),
        resolver.count(domain, RecordType::A, c),
        resolver.count(domain, RecordType::AAAA, c),
        resolver.count(domain, RecordType::NS, c),
        resolver.count(&www, RecordType::A, c),
        resolver.count(&www, RecordType::AAAA, c),
    );
    let counts = [&a, &aaaa, &ns, &www_a, &www_aaaa];
    let found = |r: &Reply<usize>| matches!(r.answer, Answer::Found(_));
    let exchanges: &[String] = match &mx.answer {
        Answer::Found(x) => x,
        _ => &[],
    };
    let null_mx = !exchanges.is_empty() && exchanges.iter().all(|x| x == ".");
    let facts = DomainFacts {
        exists: mx.answer.name_exists()
            || a.answer.name_exists()
            || aaaa.answer.name_exists()
            || ns.answer.name_exists(),
        has_mx: exchanges.iter().any(|x| x != "."),
        null_mx,
        has_website: found(&a) || found(&aaaa) || found(&www_a) || found(&www_aaaa),
    };
    let failure = mx
        .failure()
        .or_else(|| counts.iter().find_map(|r| r.failure()))
        .cloned();
    let valid_until = counts
        .iter()
        .map(|r| r.valid_until)
        .fold(mx.valid_until, Instant::min);
    (Probe { facts, failure }, valid_until)
}

/// Conclusions per domain, until they expire. Bounded: when full, expired entries go,
/// and if none has expired an arbitrary one makes room.
pub struct FactsCache {
    entries: RwLock<HashMap<Box<str>, (DomainFacts, Instant)>>,
    capacity: usize,
}

impl FactsCache {
    pub fn new(capacity: usize) -> Self {
        FactsCache {
            entries: RwLock::new(HashMap::with_capacity(capacity.min(1024))),
            capacity: capacity.max(1),
        }
    }

    pub fn get(&self, domain: &str) -> Option<DomainFacts> {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        entries
            .get(domain)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(facts, _)| *facts)
    }

    pub fn insert(&self, domain: &str, facts: DomainFacts, until: Instant) {
        let now = Instant::now();
        if until <= now {
            return;
        }
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(domain) {
            entries.retain(|_, (_, u)| *u > now);
            if entries.len() >= self.capacity {
                if let Some(k) = entries.keys().next().cloned() {
                    entries.remove(&k);
                }
            }
        }
        entries.insert(domain.into(), (facts, until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let cache = FactsCache::new(2);
        let facts = DomainFacts {
            exists: true,
            ..Default::default()
        };
        let later = Instant::now() + Duration::from_secs(60);
        cache.insert("a.com", facts, later);
        assert_eq!(cache.get("a.com"), Some(facts));
        cache.insert("gone.com", facts, Instant::now());
        assert_eq!(
            cache.get("gone.com"),
            None,
            "an expired answer is not stored"
        );
        cache.insert("b.com", facts, later);
        cache.insert("c.com", facts, later);
        let held = ["a.com", "b.com", "c.com"]
            .iter()
            .filter(|d| cache.get(d).is_some())
            .count();
        assert_eq!(held, 2);
        assert_eq!(cache.get("c.com"), Some(facts), "the newest is kept");
    }
}
