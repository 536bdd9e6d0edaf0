//! The send use case: what /v1/send (and, later, a campaign or a workflow step) calls to
//! queue emails. The project actor does the quick parts, and rendering runs in between
//! on the render pool, so a costly template never holds an arbiter that other projects
//! share.

use super::messages::{CommitSend, PrepareSend, QueuedEmail};
use super::registry::Registry;
use super::sending::{self, Prepared, SendSpec};
use crate::error::Result;
use crate::model::ProjectId;

pub async fn send(
    registry: &Registry,
    project: ProjectId,
    spec: SendSpec,
) -> Result<Vec<QueuedEmail>> {
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
    let (content, data) = (spec.content.clone(), spec.data.clone());
    let rendered = registry
        .renders()
        .run(move || sending::render(&content, &data, recipients))
        .await??;
    registry.send(project, CommitSend { spec, rendered }).await
}
