//! The domain feature's messages to the project actor, one struct each, sent from
//! `actions` and `verifier` (`CreateDomain::generate` also makes a key for the CLI).

use actix::Message;

use super::dkim::DkimKey;
use super::{Domain, DomainCheck, DomainName};
use crate::error::Result;
use crate::model::DomainId;

/// Adds a sender domain. The key pair is generated before the message is sent (it
/// takes a fraction of a second of CPU), so the actor only checks and writes.
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub struct CreateDomain {
    pub name: DomainName,
    pub token: String,
    pub key: DkimKey,
}

impl CreateDomain {
    /// A new domain with its own DKIM key pair and ownership token. RSA key generation
    /// takes a fraction of a second of CPU: call it on a blocking thread.
    pub fn generate(name: DomainName) -> Result<Self> {
        Ok(CreateDomain {
            name,
            token: super::dkim::ownership_token(),
            key: super::dkim::generate()?,
        })
    }
}

/// The operator marks a domain verified without DNS (adding it with `0`'s key if the
/// project lacks it).
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub(crate) struct TrustDomain(pub CreateDomain);

/// Records the outcome of a DNS check made by the caller.
#[derive(Debug, Message)]
#[rtype(result = "Result<Domain>")]
pub(crate) struct ApplyDomainCheck {
    pub id: DomainId,
    pub check: DomainCheck,
    /// The return path's domain the check looked for (`psrp.<domain>`'s CNAME target).
    pub return_path: Option<String>,
}
