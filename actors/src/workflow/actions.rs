//! The workflow use cases the HTTP edge calls, one function each: the write runs in
//! the project's actor, so a handler never builds a closure for it.

use super::records::{self as workflows, WorkflowPatch};
use crate::error::Result;
use crate::model::{NewWorkflow, ProjectId, Workflow, WorkflowId};
use crate::project::apply::Apply;
use crate::project::Registry;

/// Makes a workflow of `new`, with its id and the actor's time.
pub async fn create(registry: &Registry, p: ProjectId, new: NewWorkflow) -> Result<Workflow> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| workflows::create(ctx, new.made(ctx.now.millis()))),
        )
        .await
}

pub async fn update(
    registry: &Registry,
    p: ProjectId,
    id: WorkflowId,
    patch: WorkflowPatch,
) -> Result<Workflow> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| workflows::update(ctx, id, patch)),
        )
        .await
}

pub async fn delete(registry: &Registry, p: ProjectId, id: WorkflowId) -> Result<()> {
    registry
        .send(p, Apply::durable(move |ctx, _| workflows::delete(ctx, id)))
        .await
}
