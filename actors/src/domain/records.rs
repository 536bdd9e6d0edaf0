//! Domain writes, applied by the project's actor as atomic batches: the record, the
//! by-name index (one name per project) and the global index the re-checker walks.

use super::check::{DomainCheck, RecordState};
use super::model::{Domain, DomainStatus};
use super::queries::{find_by_name, get_domain};
use crate::domain::messages::CreateDomain;
use crate::error::{Error, Resource, Result};
use crate::model::{DomainId, ProjectId, Timestamp};
use crate::project::actor::check_room;
use crate::store::{keys, Batch, Store};

pub fn create(
    store: &dyn Store,
    p: ProjectId,
    msg: CreateDomain,
    now: Timestamp,
) -> Result<Domain> {
    if find_by_name(store, p, msg.name.as_str())?.is_some() {
        return Err(duplicate(msg.name.as_str()));
    }
    let domain = Domain {
        id: DomainId::new(),
        name: msg.name,
        status: DomainStatus::Pending,
        token: msg.token,
        selector: msg.key.selector,
        public_key: msg.key.public_key,
        private_key_pem: msg.key.private_key_pem,
        ownership_verified: false,
        dkim_verified: false,
        spf_verified: false,
        dmarc_verified: false,
        return_path_for: None,
        created_at: now,
        verified_at: None,
        checked_at: None,
        trusted: false,
    };
    let mut batch = Batch::new();
    batch.put(keys::domain(p, domain.id), domain.encode()?);
    batch.put(
        keys::domain_by_name(p, domain.name.as_str()),
        domain.id.to_string().into_bytes(),
    );
    batch.put(keys::domain_index(p, domain.id), Vec::new());
    store.apply(batch)?;
    Ok(domain)
}

pub fn duplicate(name: &str) -> Error {
    Error::Conflict {
        message: format!("The domain {name} has already been added to this project"),
        suggestion: Some("Verify or delete the existing domain (GET /domains)".into()),
    }
}

pub fn delete(store: &dyn Store, p: ProjectId, id: DomainId) -> Result<()> {
    let domain = get_domain(store, p, id)?.ok_or(Error::NotFound(Resource::Domain))?;
    let mut batch = Batch::new();
    batch.delete(keys::domain(p, id));
    batch.delete(keys::domain_by_name(p, domain.name.as_str()));
    batch.delete(keys::domain_index(p, id));
    batch.delete(keys::domain_advice(p, id));
    store.apply(batch).map(drop)
}

/// Records the outcome of a DNS check. Flags of records whose lookup failed keep
/// their last known value.
pub fn apply_check(
    store: &dyn Store,
    p: ProjectId,
    id: DomainId,
    check: DomainCheck,
    return_path: Option<&str>,
    now: Timestamp,
) -> Result<Domain> {
    let mut d = get_domain(store, p, id)?.ok_or(Error::NotFound(Resource::Domain))?;
    let known = |state: RecordState, before: bool| match state {
        RecordState::Unknown => before,
        other => other == RecordState::Match,
    };
    d.ownership_verified = known(check.ownership, d.ownership_verified);
    d.dkim_verified = known(check.dkim, d.dkim_verified);
    d.spf_verified = known(check.spf, d.spf_verified);
    d.dmarc_verified = known(check.dmarc, d.dmarc_verified);
    // Verified for the return path's domain it was checked against: when the operator
    // changes that domain, the old CNAME no longer counts (it points at the old one).
    d.return_path_for = match check.return_path {
        RecordState::Unknown => d.return_path_for,
        RecordState::Match => return_path.map(str::to_owned),
        _ => None,
    };
    // A trusted domain stays VERIFIED whatever DNS says (the operator vouched for it).
    let next = match d.trusted {
        true => DomainStatus::Verified,
        false => check.next_status(d.status),
    };
    if next != d.status {
        tracing::info!(project = %p, domain = %d.name, from = d.status.as_str(), to = next.as_str(), "domain status changed");
        d.verified_at = (next == DomainStatus::Verified).then_some(now);
        d.status = next;
    }
    d.checked_at = Some(now);
    let mut batch = Batch::new();
    batch.put(keys::domain(p, id), d.encode()?);
    batch.put(
        keys::domain_advice(p, id),
        advice_bytes(d.dmarc_verified, d.return_path_for.as_deref()),
    );
    store.apply(batch)?;
    Ok(d)
}

/// Marks a project's domain trusted and VERIFIED without DNS (the operator's call, from
/// the CLI or /admin; tenants cannot). A domain the project lacks is added with `msg`'s
/// key, as `create` would.
/// `trust`, making the domain first only when the project has room for one more
/// (`max`, `limits.max_domains`): the actor's path and the CLI's offline one alike.
pub fn trust_within(
    store: &dyn Store,
    p: ProjectId,
    msg: CreateDomain,
    now: Timestamp,
    max: usize,
) -> Result<Domain> {
    if find_by_name(store, p, msg.name.as_str())?.is_none() {
        check_room(store, &keys::domains(p), max, "domains")?;
    }
    trust(store, p, msg, now)
}

fn trust(store: &dyn Store, p: ProjectId, msg: CreateDomain, now: Timestamp) -> Result<Domain> {
    let mut d = match find_by_name(store, p, msg.name.as_str())? {
        Some(d) => d,
        None => create(store, p, msg, now)?,
    };
    if !d.trusted || d.status != DomainStatus::Verified {
        tracing::info!(project = %p, domain = %d.name, "domain trusted by the operator");
        d.trusted = true;
        if d.status != DomainStatus::Verified {
            d.status = DomainStatus::Verified;
            d.verified_at = Some(now);
        }
        let mut batch = Batch::new();
        batch.put(keys::domain(p, d.id), d.encode()?);
        store.apply(batch)?;
    }
    Ok(d)
}

/// `keys::domain_advice`: whether the DMARC record was there (byte 0), whether the
/// return-path host was (byte 1), and for which return-path domain (the rest).
fn advice_bytes(dmarc: bool, return_path_for: Option<&str>) -> Vec<u8> {
    let mut out = vec![u8::from(dmarc), u8::from(return_path_for.is_some())];
    out.extend_from_slice(return_path_for.unwrap_or_default().as_bytes());
    out
}
