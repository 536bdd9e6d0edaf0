//! Email address verification (/v1/verify, API.md section 7): syntax, DNS facts about
//! the domain, and list lookups (disposable, personal provider, alias service), plus a
//! typo suggestion. `valid` means: the syntax is good, the domain exists and it has MX
//! records. Disposable, alias, typo and plus-addressed addresses can still be valid;
//! `reasons` says in words what each negative finding is.

pub mod address;
pub mod facts;
pub mod lists;
pub mod typo;

use std::borrow::Cow;
use std::sync::Arc;

pub use address::{parse, Address};

use crate::dns::{DnsFailure, Resolver};
use facts::{DomainFacts, FactsCache};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub email: String,
    pub valid: bool,
    pub is_disposable: bool,
    pub is_alias: bool,
    pub is_typo: bool,
    pub is_plus_addressed: bool,
    pub is_personal_email: bool,
    pub domain_exists: bool,
    pub has_website: bool,
    pub has_mx_records: bool,
    pub reasons: Vec<Cow<'static, str>>,
    pub suggested_email: Option<String>,
}

pub struct EmailVerifier {
    resolver: Arc<Resolver>,
    cache: FactsCache,
    /// The engine's counters (cache hits and misses).
    metrics: Arc<crate::metrics::Metrics>,
}

impl EmailVerifier {
    pub fn new(
        resolver: Arc<Resolver>,
        cache_size: usize,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        lists::warm();
        EmailVerifier {
            resolver,
            cache: FactsCache::new(cache_size),
            metrics,
        }
    }

    pub async fn verify(&self, address: &Address) -> Verification {
        let mut reasons: Vec<Cow<'static, str>> =
            address.problems.iter().map(|p| Cow::Borrowed(*p)).collect();
        let domain = address.ascii_domain.as_deref();
        let suggestion = domain.and_then(typo::suggest);
        let is_disposable = domain.is_some_and(lists::is_disposable);
        let is_alias = domain.is_some_and(lists::is_alias);
        if let Some(s) = &suggestion {
            reasons.push(format!("The domain looks like a typo of {s}").into());
        }
        if is_disposable {
            reasons.push("The domain belongs to a disposable email service".into());
        }
        if is_alias {
            reasons.push("The address is at an alias or forwarding service".into());
        }
        let facts = match domain {
            Some(d) => self.domain_facts(d, &mut reasons).await,
            None => DomainFacts::default(),
        };
        Verification {
            email: address.normalized.clone(),
            valid: address.syntax_ok() && facts.exists && facts.has_mx,
            is_disposable,
            is_alias,
            is_typo: suggestion.is_some(),
            is_plus_addressed: address.is_plus_addressed(),
            is_personal_email: domain.is_some_and(lists::is_personal),
            domain_exists: facts.exists,
            has_website: facts.has_website,
            has_mx_records: facts.has_mx,
            reasons,
            suggested_email: suggestion.map(|s| format!("{}@{s}", address.local)),
        }
    }

    async fn domain_facts(
        &self,
        domain: &str,
        reasons: &mut Vec<Cow<'static, str>>,
    ) -> DomainFacts {
        let cached = self.cache.get(domain);
        let counter = match cached {
            Some(_) => &self.metrics.dns_cache_hits,
            None => &self.metrics.dns_cache_misses,
        };
        counter.add(1);
        let facts = match cached {
            Some(f) => f,
            None => {
                let (probe, valid_until) = facts::probe(&self.resolver, domain).await;
                let Some(failure) = probe.failure else {
                    self.cache.insert(domain, probe.facts, valid_until);
                    return Self::explain(probe.facts, reasons);
                };
                // What was learned before the failure stands; what was not is unknown,
                // and "does not exist" would be a guess.
                reasons.push(match failure {
                    DnsFailure::Timeout => format!(
                        "DNS did not answer within {} ms, so the domain could not be fully checked",
                        self.resolver.timeout().as_millis()
                    ),
                    DnsFailure::Error(e) => {
                        format!("DNS lookups failed ({e}), so the domain could not be fully checked")
                    }
                }
                .into());
                return probe.facts;
            }
        };
        Self::explain(facts, reasons)
    }

    /// The reasons that complete DNS answers give.
    fn explain(facts: DomainFacts, reasons: &mut Vec<Cow<'static, str>>) -> DomainFacts {
        if !facts.exists {
            reasons.push("The domain does not exist".into());
        } else if facts.null_mx {
            reasons.push("The domain publishes a null MX record: it accepts no email".into());
        } else if !facts.has_mx {
            reasons.push("The domain has no MX records, so it cannot receive email".into());
        }
        if facts.exists && !facts.has_website {
            reasons
                .push("Neither the domain nor its www. subdomain has an A or AAAA record".into());
        }
        facts
    }
}
