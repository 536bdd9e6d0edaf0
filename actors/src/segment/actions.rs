//! The segment writes the edge calls, one function each, so a handler never builds a
//! message for the project's actor. The filters come parsed and within their budget
//! (`segment::budget`), as the edge checks them before it calls.

use super::handlers::{Create, Delete, Update};
use super::records::{self as segments, CreateSegment, MembersOutcome, UpdateSegment};
use super::Segment;
use crate::error::Result;
use crate::model::{EmailAddress, ProjectId, SegmentId};
use crate::project::apply::Apply;
use crate::project::Registry;

pub async fn create(registry: &Registry, p: ProjectId, req: CreateSegment) -> Result<Segment> {
    registry.send(p, Create(req)).await
}

pub async fn update(registry: &Registry, p: ProjectId, req: UpdateSegment) -> Result<Segment> {
    registry.send(p, Update(req)).await
}

pub async fn delete(registry: &Registry, p: ProjectId, id: SegmentId) -> Result<()> {
    registry.send(p, Delete(id)).await
}

/// Adds (`add`) or removes contacts of a STATIC segment by email (409 for a DYNAMIC
/// one); emails with no contact come back as `not_found`.
pub async fn change_members(
    registry: &Registry,
    p: ProjectId,
    id: SegmentId,
    emails: Vec<EmailAddress>,
    add: bool,
) -> Result<MembersOutcome> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| segments::change_members(ctx, id, &emails, add)),
        )
        .await
}
