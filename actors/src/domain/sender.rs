//! For the send path: may this project send from this address, and with which key?

use super::queries::find_by_name;
use crate::dns::name::{self_and_parents, to_ascii};
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
    /// The return path's domain `psrp.<domain>` pointed at at the last check: when it is
    /// the one configured, the envelope sender uses it (SPF aligned with the From domain).
    pub return_path_for: Option<String>,
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
                    return_path_for: d.return_path_for,
                }));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
pub fn is_verified_sender(
    store: &dyn Store,
    project: ProjectId,
    from: &EmailAddress,
) -> Result<bool> {
    verified_sender(store, project, from).map(|s| s.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::check::{DomainCheck, RecordState};
    use crate::domain::messages::CreateDomain;
    use crate::domain::{dkim, records, DomainName};
    use crate::model::Timestamp;
    use crate::store::SledStore;

    fn add(
        store: &dyn Store,
        p: ProjectId,
        name: &str,
        key: &dkim::DkimKey,
    ) -> crate::model::DomainId {
        let msg = CreateDomain {
            name: DomainName::parse(name).unwrap(),
            token: dkim::ownership_token(),
            key: key.clone(),
        };
        records::create(store, p, msg, Timestamp::from(0))
            .unwrap()
            .id
    }

    fn check(all: RecordState) -> DomainCheck {
        DomainCheck {
            ownership: all,
            dkim: all,
            spf: all,
            dmarc: all,
            return_path: all,
        }
    }

    fn from(s: &str) -> EmailAddress {
        EmailAddress::parse(s).unwrap()
    }

    #[test]
    fn only_a_verified_domain_or_a_verified_parent_may_send() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let (p, other) = (ProjectId::new(), ProjectId::new());
        let key = dkim::generate().unwrap();
        let id = add(&*store, p, "example.com", &key);
        let pending = verified_sender(&*store, p, &from("ada@example.com")).unwrap();
        assert!(pending.is_none(), "PENDING may not send");

        records::apply_check(
            &*store,
            p,
            id,
            check(RecordState::Match),
            None,
            Timestamp::from(1),
        )
        .unwrap();
        let s = verified_sender(&*store, p, &from("ada@example.com"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.domain.as_str(), s.selector.as_str()),
            ("example.com", key.selector.as_str())
        );
        assert_eq!(s.private_key_pem, key.private_key_pem);
        let sub = verified_sender(&*store, p, &from("news@mail.example.com")).unwrap();
        assert_eq!(
            sub.unwrap().domain,
            "example.com",
            "a subdomain signs with its parent"
        );
        assert!(!is_verified_sender(&*store, p, &from("ada@example.org")).unwrap());
        assert!(!is_verified_sender(&*store, p, &from("ada@notexample.com")).unwrap());
        assert!(
            !is_verified_sender(&*store, other, &from("ada@example.com")).unwrap(),
            "per project"
        );

        records::apply_check(
            &*store,
            p,
            id,
            check(RecordState::Absent),
            None,
            Timestamp::from(2),
        )
        .unwrap();
        assert!(
            !is_verified_sender(&*store, p, &from("ada@example.com")).unwrap(),
            "FAILED may not send"
        );
        records::apply_check(
            &*store,
            p,
            id,
            check(RecordState::Match),
            None,
            Timestamp::from(3),
        )
        .unwrap();
        assert!(is_verified_sender(&*store, p, &from("ada@example.com")).unwrap());
        records::delete(&*store, p, id).unwrap();
        assert!(
            !is_verified_sender(&*store, p, &from("ada@example.com")).unwrap(),
            "deleted"
        );
    }
}
