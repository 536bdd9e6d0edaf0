//! The send use case: what /v1/send (and, later, a campaign or a workflow step) calls to
//! queue emails. The project actor does the quick parts, and rendering runs in between
//! on the render pool, so a costly template never holds an arbiter that other projects
//! share.

use super::messages::{CommitSend, PrepareSend};
use super::registry::Registry;
use super::sending::{self, Prepared, Receipt, SendSpec};
use crate::error::Result;
use crate::model::ProjectId;

/// Charged steps of one send's renders that run inline rather than on the pool.
const INLINE_STEPS: u64 = 5_000;

pub async fn send(registry: &Registry, project: ProjectId, spec: SendSpec) -> Result<Receipt> {
    let prepare = PrepareSend {
        recipients: spec.recipients.clone(),
        subscribed: spec.subscribed,
        marketing: spec.marketing,
        idempotency: spec.idempotency.clone(),
    };
    let recipients = match registry.send(project, prepare).await? {
        Prepared::Replay(reply) => return Ok(reply),
        Prepared::Recipients(r) => r,
    };
    // Each recipient's render is charged first (a 422 here means it would pass a limit).
    // Renders charged at a few thousand steps in all take microseconds: they run right
    // here (an HTTP worker, never an actor). Costlier ones go to the render pool, so a
    // slow one holds neither an actor nor a worker that other projects' requests need.
    let content = spec.content.clone();
    let (jobs, steps) = sending::plan(&content, &spec.data, recipients)?;
    let rendered = if steps <= INLINE_STEPS {
        sending::render(&content, jobs)?
    } else {
        registry
            .renders()
            .run(move || sending::render(&content, jobs))
            .await??
    };
    registry.send(project, CommitSend { spec, rendered }).await
}
