//! Deleting a contact and driving its erasure (`erasure`): the delete and a first slice
//! in one message, then, for a contact too large to finish there, one slice per
//! message in the background, so the project's other writes go on in between. Start-up
//! resumes every erasure left unfinished (`resume`).

use std::time::Duration;

use super::erase as erasure;
use crate::contact::records as contacts;
use crate::error::{Error, Result};
use crate::model::{ContactId, ProjectId};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::store::keys;

/// How a delete ended: erased already, or queued and going on in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Erased {
    Done,
    Queued,
}

/// DELETE /contacts/{id}: the contact is gone (and its erasure durable) when this
/// answers; the rest of its data is erased by then, or queued.
pub async fn delete_contact(registry: &Registry, p: ProjectId, c: ContactId) -> Result<Erased> {
    let attempts = registry.attempts().clone();
    let held = attempts.clone();
    let budget = registry.erasure_slice();
    let progress = registry
        .send(
            p,
            Apply::durable(move |ctx, counts| {
                contacts::delete(ctx, counts, c)?;
                erasure::run(ctx.store, ctx.project, c, &held, ctx.hooks, budget, ctx.now)
            }),
        )
        .await?;
    attempts.forget(&progress.dropped);
    registry
        .metrics()
        .emails_cancelled
        .add(progress.dropped.len() as u64);
    if progress.done {
        return Ok(Erased::Done);
    }
    tracing::info!(project = %p, contact = %c, "contact deleted; erasing the rest of its data in the background");
    spawn(registry.clone(), p, c);
    Ok(Erased::Queued)
}

/// At start-up: starts a driver for every erasure of the projects this node owns, and
/// has the registry resume a project's erasures whenever this node takes one later
/// (call it once); answers how many started now.
pub fn resume(registry: &Registry) -> Result<usize> {
    registry.on_acquire(std::sync::Arc::new(|registry, p| {
        if let Err(e) = resume_project(registry, p) {
            tracing::warn!(project = %p, error = %e, "resuming a project's erasures");
        }
    }));
    resume_under(registry, keys::ERASURES)
}

/// Starts a driver for every erasure of project `p` (a project this node just took).
pub fn resume_project(registry: &Registry, p: ProjectId) -> Result<usize> {
    resume_under(registry, &keys::with_id(keys::ERASURES, p.as_bytes()))
}

fn resume_under(registry: &Registry, prefix: &[u8]) -> Result<usize> {
    let mut n = 0;
    for kv in registry.store().scan(prefix, None, false) {
        let (k, _) = kv?;
        if let Some((p, c)) = keys::parse_erasure(&k).filter(|(p, _)| registry.ownership().owns(*p))
        {
            tracing::info!(project = %p, contact = %c, "contact erasure resumes");
            spawn(registry.clone(), p, c);
            n += 1;
        }
    }
    Ok(n)
}

fn spawn(registry: Registry, p: ProjectId, c: ContactId) {
    actix::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            match slice(&registry, p, c).await {
                Ok(true) => return,
                Ok(false) => backoff = Duration::from_millis(100),
                // The project moved to another node: the erasure goes on there.
                Err(Error::NotOwner { .. }) => return,
                Err(e) => {
                    if !matches!(e, Error::Busy { .. }) {
                        tracing::warn!(project = %p, contact = %c, error = %e, "contact erasure failed; retrying");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    });
}

/// One slice, answered once durable; whether the erasure is over.
async fn slice(registry: &Registry, p: ProjectId, c: ContactId) -> Result<bool> {
    let attempts = registry.attempts().clone();
    let held = attempts.clone();
    let budget = registry.erasure_slice();
    let progress = registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                erasure::run(ctx.store, ctx.project, c, &held, ctx.hooks, budget, ctx.now)
            }),
        )
        .await?;
    attempts.forget(&progress.dropped);
    registry
        .metrics()
        .emails_cancelled
        .add(progress.dropped.len() as u64);
    Ok(progress.done)
}
