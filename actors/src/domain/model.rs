//! A sender domain: its name, status, the DKIM key pair and the TXT records that the
//! owner publishes to prove ownership and to let receivers check signatures.

use serde::{Deserialize, Serialize};

use crate::dns::name::DomainName;
use crate::error::{Error, Result};
use crate::model::{DomainId, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DomainStatus {
    Pending,
    Verified,
    Failed,
}

impl DomainStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DomainStatus::Pending => "PENDING",
            DomainStatus::Verified => "VERIFIED",
            DomainStatus::Failed => "FAILED",
        }
    }

    /// Accepts the wire form in any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "PENDING" => Some(DomainStatus::Pending),
            "VERIFIED" => Some(DomainStatus::Verified),
            "FAILED" => Some(DomainStatus::Failed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPurpose {
    Ownership,
    Dkim,
    Spf,
    /// Advice: receivers apply the domain's DMARC policy; none does not block VERIFIED.
    Dmarc,
    /// The return-path host under the domain (`psrp.<domain>`, a CNAME to
    /// `feedback.return_path_domain`): once it is there, the envelope sender uses it,
    /// so SPF aligns with the From domain. Optional; never blocks VERIFIED.
    ReturnPath,
}

impl RecordPurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordPurpose::Ownership => "OWNERSHIP",
            RecordPurpose::Dkim => "DKIM",
            RecordPurpose::Spf => "SPF",
            RecordPurpose::Dmarc => "DMARC",
            RecordPurpose::ReturnPath => "RETURN_PATH",
        }
    }
}

/// A DNS record the owner should publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedRecord {
    pub kind: &'static str,
    pub name: String,
    pub value: String,
    pub purpose: RecordPurpose,
    pub verified: bool,
}

/// What the operator's settings make a domain publish: the SPF mechanism
/// (`domains.spf_include`) and the return path's domain (`feedback.return_path_domain`),
/// when reports come back by mail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordPolicy {
    pub spf_include: String,
    pub return_path_domain: Option<String>,
}

impl RecordPolicy {
    pub fn new(spf_include: &str, return_path_domain: Option<&str>) -> RecordPolicy {
        RecordPolicy {
            spf_include: spf_include.to_owned(),
            return_path_domain: return_path_domain
                .map(|d| d.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|d| !d.is_empty()),
        }
    }
}

/// The return-path host under a sender domain (Postal's name for it).
pub(crate) const RETURN_PATH_LABEL: &str = "psrp";

/// `psrp.<domain>`: where an aligned envelope sender of `domain` goes.
pub(crate) fn aligned_host(domain: &str) -> String {
    format!("{RETURN_PATH_LABEL}.{domain}")
}

#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    pub id: DomainId,
    pub name: DomainName,
    pub status: DomainStatus,
    /// The value of the ownership record, after `mailroom-verification=`.
    pub token: String,
    pub selector: String,
    /// Base64 of the DER SubjectPublicKeyInfo, as DKIM's `p=` tag wants it.
    pub public_key: String,
    /// PKCS#1 PEM. Never leaves the engine except to sign mail.
    pub private_key_pem: String,
    pub ownership_verified: bool,
    pub dkim_verified: bool,
    pub spf_verified: bool,
    pub created_at: Timestamp,
    /// When the domain became VERIFIED; None while it is not.
    pub verified_at: Option<Timestamp>,
    pub checked_at: Option<Timestamp>,
    /// Whether `_dmarc.<domain>` held a `v=DMARC1` record at the last check (kept beside
    /// the domain's record: `keys::domain_advice`).
    pub dmarc_verified: bool,
    /// The return path's domain that `psrp.<domain>` was a CNAME to at the last check
    /// (kept beside it too); None when it was not.
    pub return_path_for: Option<String>,
    /// Marked verified by the operator (CLI or /admin) without DNS: a laptop's first
    /// email, or a domain whose records the operator vouches for. Checks still record
    /// what DNS says, but never change its status.
    pub trusted: bool,
}

impl Domain {
    pub fn is_verified(&self) -> bool {
        self.status == DomainStatus::Verified
    }

    pub fn ownership_name(&self) -> String {
        format!("_mailroom.{}", self.name)
    }

    pub fn ownership_value(&self) -> String {
        format!("mailroom-verification={}", self.token)
    }

    pub fn dkim_name(&self) -> String {
        format!("{}._domainkey.{}", self.selector, self.name)
    }

    pub fn dkim_value(&self) -> String {
        format!("v=DKIM1; k=rsa; p={}", self.public_key)
    }

    pub fn dmarc_name(&self) -> String {
        format!("_dmarc.{}", self.name)
    }

    /// A first DMARC policy to publish: report only (`p=none`), relaxed alignment; the
    /// owner tightens it once the reports look right.
    pub fn dmarc_value() -> &'static str {
        "v=DMARC1; p=none; adkim=r; aspf=r"
    }

    pub fn spf_value(spf_include: &str) -> String {
        format!("v=spf1 {spf_include} ~all")
    }

    /// The records to publish, in the order a person would add them.
    pub fn return_path_name(&self) -> String {
        aligned_host(self.name.as_str())
    }

    pub fn records(&self, policy: &RecordPolicy) -> Vec<PublishedRecord> {
        let mut out = vec![
            PublishedRecord {
                kind: "TXT",
                name: self.ownership_name(),
                value: self.ownership_value(),
                purpose: RecordPurpose::Ownership,
                verified: self.ownership_verified,
            },
            PublishedRecord {
                kind: "TXT",
                name: self.dkim_name(),
                value: self.dkim_value(),
                purpose: RecordPurpose::Dkim,
                verified: self.dkim_verified,
            },
            PublishedRecord {
                kind: "TXT",
                name: self.name.to_string(),
                value: Self::spf_value(&policy.spf_include),
                purpose: RecordPurpose::Spf,
                verified: self.spf_verified,
            },
            PublishedRecord {
                kind: "TXT",
                name: self.dmarc_name(),
                value: Self::dmarc_value().to_owned(),
                purpose: RecordPurpose::Dmarc,
                verified: self.dmarc_verified,
            },
        ];
        if let Some(rp) = &policy.return_path_domain {
            out.push(PublishedRecord {
                kind: "CNAME",
                name: self.return_path_name(),
                value: rp.clone(),
                purpose: RecordPurpose::ReturnPath,
                verified: self.return_path_for.as_deref() == Some(rp.as_str()),
            });
        }
        out
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::store::codec::encode(&Stored {
            id: self.id,
            name: self.name.to_string(),
            status: self.status,
            token: self.token.clone(),
            selector: self.selector.clone(),
            public_key: self.public_key.clone(),
            private_key_pem: self.private_key_pem.clone(),
            ownership_verified: self.ownership_verified,
            dkim_verified: self.dkim_verified,
            spf_verified: self.spf_verified,
            created_at: self.created_at.millis(),
            verified_at: self.verified_at.map(|t| t.millis()),
            checked_at: self.checked_at.map(|t| t.millis()),
            trusted: self.trusted,
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::store::codec::decode(bytes)?;
        Ok(Domain {
            id: s.id,
            name: DomainName::parse(&s.name)
                .map_err(|_| Error::storage(format!("stored domain {} has a bad name", s.id)))?,
            status: s.status,
            token: s.token,
            selector: s.selector,
            public_key: s.public_key,
            private_key_pem: s.private_key_pem,
            ownership_verified: s.ownership_verified,
            dkim_verified: s.dkim_verified,
            spf_verified: s.spf_verified,
            dmarc_verified: false,
            return_path_for: None,
            created_at: s.created_at.into(),
            verified_at: s.verified_at.map(Timestamp::from),
            checked_at: s.checked_at.map(Timestamp::from),
            trusted: s.trusted,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    id: DomainId,
    name: String,
    status: DomainStatus,
    token: String,
    selector: String,
    public_key: String,
    private_key_pem: String,
    ownership_verified: bool,
    dkim_verified: bool,
    spf_verified: bool,
    created_at: i64,
    verified_at: Option<i64>,
    checked_at: Option<i64>,
    trusted: bool,
}
