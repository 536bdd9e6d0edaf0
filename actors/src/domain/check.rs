//! Checking a domain's published records against what it should publish, and the
//! status that follows.
//!
//! - VERIFIED when the ownership and DKIM records both match.
//! - A DKIM record that exists but carries another key is wrong: FAILED at once.
//! - A VERIFIED domain whose records no longer match goes FAILED.
//! - Records that are simply not there yet keep a PENDING domain PENDING.
//! - A DNS failure (timeout, SERVFAIL) proves nothing and changes nothing.
//!
//! An ownership TXT with another token is not "wrong": another project may have added
//! the same domain, and both tokens live at `_mailroom.<domain>`.

use super::model::{Domain, DomainStatus, RecordPolicy};
use crate::dns::{Answer, Freshness, Resolver};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Match,
    /// A record is there, with the wrong value.
    Mismatch,
    Absent,
    /// DNS did not answer; nothing is known.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainCheck {
    pub ownership: RecordState,
    pub dkim: RecordState,
    pub spf: RecordState,
    /// Advice only: it never changes the status.
    pub dmarc: RecordState,
    /// `psrp.<domain>` as a CNAME to the return path's domain (Absent when there is none
    /// configured): it never changes the status either.
    pub return_path: RecordState,
}

/// Asks the nameservers now (no cache) for the domain's three records.
pub async fn run(resolver: &Resolver, domain: &Domain, policy: &RecordPolicy) -> DomainCheck {
    let (ownership_name, dkim_name) = (domain.ownership_name(), domain.dkim_name());
    let (dmarc_name, return_path_name) = (domain.dmarc_name(), domain.return_path_name());
    let return_path = async {
        match &policy.return_path_domain {
            Some(target) => {
                let got = resolver.cname(&return_path_name, Freshness::Fresh).await;
                judge(
                    &got.answer,
                    |t| t.trim_end_matches('.').eq_ignore_ascii_case(target),
                    false,
                )
            }
            None => RecordState::Absent,
        }
    };
    let (ownership, dkim, spf, dmarc, return_path) = futures_util::join!(
        resolver.txt(&ownership_name, Freshness::Fresh),
        resolver.txt(&dkim_name, Freshness::Fresh),
        resolver.txt(domain.name.as_str(), Freshness::Fresh),
        resolver.txt(&dmarc_name, Freshness::Fresh),
        return_path,
    );
    let spf_include = policy.spf_include.as_str();
    let expected_ownership = domain.ownership_value();
    DomainCheck {
        ownership: judge(&ownership.answer, |t| t.trim() == expected_ownership, false),
        dkim: judge(&dkim.answer, |t| dkim_matches(t, &domain.public_key), true),
        spf: judge(&spf.answer, |t| spf_matches(t, spf_include), false),
        dmarc: judge(&dmarc.answer, dmarc_matches, false),
        return_path,
    }
}

/// `mismatch_counts`: whether a non-matching record at the name is an error.
fn judge(
    answer: &Answer<Vec<String>>,
    ok: impl Fn(&str) -> bool,
    mismatch_counts: bool,
) -> RecordState {
    match answer {
        Answer::Found(txts) if txts.iter().any(|t| ok(t)) => RecordState::Match,
        Answer::Found(_) if mismatch_counts => RecordState::Mismatch,
        Answer::Found(_) | Answer::NoRecords { .. } => RecordState::Absent,
        Answer::Failed(_) => RecordState::Unknown,
    }
}

/// A DMARC record (RFC 7489 6.4): `v=DMARC1` first, whatever the policy.
pub fn dmarc_matches(txt: &str) -> bool {
    txt.split(';')
        .next()
        .is_some_and(|v| v.trim().replace(' ', "").eq_ignore_ascii_case("v=DMARC1"))
}

/// A DKIM key record (RFC 6376 3.6.1): tags separated by `;`, whitespace anywhere.
pub fn dkim_matches(txt: &str, public_key: &str) -> bool {
    let mut p = None;
    for tag in txt.split(';') {
        let Some((k, v)) = tag.split_once('=') else {
            continue;
        };
        let v: String = v.chars().filter(|c| !c.is_whitespace()).collect();
        match k.trim() {
            "v" if v != "DKIM1" => return false,
            "k" if !v.eq_ignore_ascii_case("rsa") => return false,
            "p" => p = Some(v),
            _ => {}
        }
    }
    p.as_deref() == Some(public_key)
}

/// An SPF policy that includes the configured mechanism.
pub fn spf_matches(txt: &str, include: &str) -> bool {
    let mut terms = txt.split_whitespace();
    terms
        .next()
        .is_some_and(|v| v.eq_ignore_ascii_case("v=spf1"))
        && terms.any(|t| t.eq_ignore_ascii_case(include))
}

impl DomainCheck {
    /// Whether the check says anything about the two records that decide the status.
    pub fn is_conclusive(&self) -> bool {
        self.ownership != RecordState::Unknown && self.dkim != RecordState::Unknown
    }

    pub fn next_status(&self, current: DomainStatus) -> DomainStatus {
        use RecordState::*;
        if !self.is_conclusive() {
            return current;
        }
        match (self.ownership, self.dkim) {
            (Match, Match) => DomainStatus::Verified,
            (_, Mismatch) => DomainStatus::Failed,
            _ if current == DomainStatus::Verified => DomainStatus::Failed,
            _ => current,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RecordState::*;
    use super::*;

    fn check(ownership: RecordState, dkim: RecordState) -> DomainCheck {
        DomainCheck {
            ownership,
            dkim,
            spf: Absent,
            dmarc: Absent,
            return_path: Absent,
        }
    }

    #[test]
    fn both_records_matching_verifies_from_any_status() {
        for s in [
            DomainStatus::Pending,
            DomainStatus::Failed,
            DomainStatus::Verified,
        ] {
            assert_eq!(check(Match, Match).next_status(s), DomainStatus::Verified);
        }
    }

    #[test]
    fn missing_records_keep_pending_but_fail_a_verified_domain() {
        assert_eq!(
            check(Absent, Absent).next_status(DomainStatus::Pending),
            DomainStatus::Pending
        );
        assert_eq!(
            check(Match, Absent).next_status(DomainStatus::Pending),
            DomainStatus::Pending
        );
        assert_eq!(
            check(Match, Absent).next_status(DomainStatus::Verified),
            DomainStatus::Failed
        );
        assert_eq!(
            check(Absent, Absent).next_status(DomainStatus::Failed),
            DomainStatus::Failed
        );
    }

    #[test]
    fn a_wrong_dkim_key_fails_and_a_dns_failure_changes_nothing() {
        assert_eq!(
            check(Match, Mismatch).next_status(DomainStatus::Pending),
            DomainStatus::Failed
        );
        assert_eq!(
            check(Unknown, Match).next_status(DomainStatus::Verified),
            DomainStatus::Verified
        );
        assert_eq!(
            check(Match, Unknown).next_status(DomainStatus::Pending),
            DomainStatus::Pending
        );
    }

    #[test]
    fn dkim_records_match_by_key_whatever_the_whitespace() {
        assert!(dkim_matches("v=DKIM1; k=rsa; p=MIIBIj", "MIIBIj"));
        assert!(dkim_matches("v=DKIM1;k=rsa;p=MII BIj ", "MIIBIj"));
        assert!(dkim_matches("p=MIIBIj", "MIIBIj"), "v and k are optional");
        assert!(!dkim_matches("v=DKIM1; k=rsa; p=OTHER", "MIIBIj"));
        assert!(!dkim_matches("v=DKIM1; k=ed25519; p=MIIBIj", "MIIBIj"));
        assert!(
            !dkim_matches("v=DKIM1; k=rsa; p=", "MIIBIj"),
            "a revoked key"
        );
    }

    #[test]
    fn spf_needs_the_version_and_the_include() {
        let inc = "include:_spf.mailroom.local";
        assert!(spf_matches("v=spf1 include:_spf.mailroom.local ~all", inc));
        assert!(spf_matches(
            "v=spf1 mx INCLUDE:_spf.mailroom.local -all",
            inc
        ));
        assert!(!spf_matches("v=spf1 mx -all", inc));
        assert!(!spf_matches("include:_spf.mailroom.local", inc));
    }
}
