//! For the send path: may this project send from this address, and with which key?

use super::name::{self_and_parents, to_ascii};
use super::queries::find_by_name;
use crate::error::Result;
use crate::model::{EmailAddress, ProjectId};
use crate::store::Store;

/// What the mailer needs to DKIM-sign mail from a verified domain.
#[derive(Clone)]
pub struct SenderDomain {
    /// The verified domain (the `d=` of the signature); the from-domain or a parent.
    pub domain: String,
    pub selector: String,
    /// PKCS#1 PEM, for `lettre::message::dkim::DkimSigningKey::new(pem, DkimSigningAlgorithm::Rsa)`.
    pub private_key_pem: String,
}

impl std::fmt::Debug for SenderDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SenderDomain")
            .field("domain", &self.domain)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// The project's VERIFIED domain that is the from-domain or its nearest parent
/// (mail from `news.example.com` may use a verified `example.com`). None when there is
/// none: the domain was never added, is not verified (PENDING or FAILED), or was deleted.
pub fn verified_sender(
    store: &dyn Store,
    project: ProjectId,
    from: &EmailAddress,
) -> Result<Option<SenderDomain>> {
    let Ok(domain) = to_ascii(from.domain()) else {
        return Ok(None);
    };
    for candidate in self_and_parents(&domain) {
        if let Some(d) = find_by_name(store, project, candidate)? {
            if d.is_verified() {
                return Ok(Some(SenderDomain {
                    domain: d.name.to_string(),
                    selector: d.selector,
                    private_key_pem: d.private_key_pem,
                }));
            }
        }
    }
    Ok(None)
}

pub fn is_verified_sender(
    store: &dyn Store,
    project: ProjectId,
    from: &EmailAddress,
) -> Result<bool> {
    verified_sender(store, project, from).map(|s| s.is_some())
}
