//! The sender-domain use cases the edge calls, one function each: adding a domain
//! (`POST /domains`), the operator's trust through `/admin` (whose first step is the
//! same), and deleting one. A DNS check is `verifier::check_now`.

use super::queries::find_by_name;
use super::records::{self, duplicate};
use super::{Domain, DomainName};
use crate::domain::messages::{CreateDomain, TrustDomain};
use crate::error::{Error, Result};
use crate::model::{DomainId, ProjectId};
use crate::project::apply::Apply;
use crate::project::Registry;

/// A name, with its ownership token and a new DKIM key. The key costs tens of
/// milliseconds of CPU, so it is made on the blocking pool.
async fn prepare(name: DomainName) -> Result<CreateDomain> {
    tokio::task::spawn_blocking(move || CreateDomain::generate(name))
        .await
        .map_err(|e| Error::Internal(format!("making a DKIM key: {e}")))?
}

/// Adds the domain (PENDING until DNS shows its records). A name the project has already
/// is a conflict, found before a key is made; the project's actor checks again.
pub async fn add(registry: &Registry, p: ProjectId, name: DomainName) -> Result<Domain> {
    if find_by_name(&**registry.store(), p, name.as_str())?.is_some() {
        return Err(duplicate(name.as_str()));
    }
    registry.send(p, prepare(name).await?).await
}

/// Marks the domain verified without DNS, adding it first if the project lacks it: the
/// operator's call only.
pub async fn trust(registry: &Registry, p: ProjectId, name: DomainName) -> Result<Domain> {
    registry.send(p, TrustDomain(prepare(name).await?)).await
}

/// Deletes the domain (404 when the project has no such domain).
pub async fn delete(registry: &Registry, p: ProjectId, id: DomainId) -> Result<()> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| records::delete(ctx.store, ctx.project, id)),
        )
        .await
}
