//! Driving an import (`import`): a slice is read and parsed off the actor (a blocking
//! task), then applied by the project's actor in one message, so the project's other
//! writes go on between slices. Start-up resumes every import left unfinished.

use std::time::Duration;

use super::import::{self, Import};
use crate::error::{Error, Result};
use crate::model::{ImportId, ProjectId};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::store::keys;

/// Stores an upload (durably) and starts importing it, if the project has fewer than
/// `max_running` imports under way: each holds its whole file on disk until it ends.
/// Two uploads at the same moment may both pass the check; the bound is still there.
pub async fn start(
    registry: &Registry,
    p: ProjectId,
    csv: Vec<u8>,
    max_running: u64,
) -> Result<Import> {
    let store = registry.store().clone();
    let now = crate::model::Timestamp::from(registry.clock().now());
    let import = tokio::task::spawn_blocking(move || {
        if import::unfinished(&*store, p)? >= max_running {
            return Err(crate::project::limits::full(
                "imports under way",
                max_running,
                "max_running_imports",
            ));
        }
        import::create(&*store, p, &csv, now)
    })
    .await
    .map_err(|e| Error::Internal(format!("storing an import: {e}")))??;
    registry.store().durable().await?;
    spawn(registry.clone(), p, import.id);
    Ok(import)
}

/// At start-up: starts a driver for every unfinished import of the projects this node
/// owns, and has the registry resume a project's imports whenever this node takes one
/// later (call it once); answers how many started now.
pub fn resume(registry: &Registry) -> Result<usize> {
    registry.on_acquire(std::sync::Arc::new(|registry, p| {
        if let Err(e) = resume_project(registry, p) {
            tracing::warn!(project = %p, error = %e, "resuming a project's imports");
        }
    }));
    resume_under(registry, keys::IMPORTS)
}

/// Starts a driver for every unfinished import of project `p` (a project this node
/// just took).
pub fn resume_project(registry: &Registry, p: ProjectId) -> Result<usize> {
    resume_under(registry, &keys::imports_of(p))
}

fn resume_under(registry: &Registry, prefix: &[u8]) -> Result<usize> {
    let mut n = 0;
    for kv in registry.store().scan(prefix, None, false) {
        let (k, v) = kv?;
        let Some((p, id)) = keys::parse_import(&k) else {
            continue;
        };
        if !registry.ownership().owns(p) {
            continue;
        }
        let import: Import = crate::store::codec::decode(&v)?;
        if !import.status.is_over() {
            tracing::info!(project = %p, import = %id, "contact import resumes");
            spawn(registry.clone(), p, id);
            n += 1;
        }
    }
    Ok(n)
}

fn spawn(registry: Registry, p: ProjectId, id: ImportId) {
    actix::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        loop {
            match step(&registry, p, id).await {
                Ok(true) => return,
                Ok(false) => backoff = Duration::from_millis(50),
                // The project moved to another node: the import goes on there.
                Err(Error::NotOwner { .. }) => return,
                Err(e) => {
                    if !matches!(e, Error::Busy { .. }) {
                        tracing::warn!(project = %p, import = %id, error = %e, "contact import slice failed; retrying");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    });
}

/// One slice; whether the import is over.
async fn step(registry: &Registry, p: ProjectId, id: ImportId) -> Result<bool> {
    let store = registry.store().clone();
    let rows = registry.import_slice_rows();
    let read = tokio::task::spawn_blocking(move || -> Result<Option<Result<import::Slice>>> {
        let Some(import) = import::load(&*store, p, id)? else {
            return Ok(None);
        };
        if import.status.is_over() {
            return Ok(None);
        }
        Ok(Some(import::read_slice(&*store, p, &import, rows)))
    })
    .await
    .map_err(|e| Error::Internal(format!("reading an import: {e}")))??;
    let slice = match read {
        None => return Ok(true),
        Some(Ok(slice)) => slice,
        Some(Err(e)) => {
            tracing::error!(project = %p, import = %id, error = %e, "contact import failed");
            let why = e.to_string();
            registry
                .send(
                    p,
                    Apply::durable(move |ctx, _| import::fail(ctx.store, p, id, &why, ctx.now)),
                )
                .await?;
            return Ok(true);
        }
    };
    let import = registry
        .send(
            p,
            Apply::durable(move |ctx, counts| import::apply(ctx, counts, id, slice)),
        )
        .await?;
    Ok(import.status.is_over())
}
