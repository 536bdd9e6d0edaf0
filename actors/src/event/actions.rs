//! /v1/track as the edge calls it: one function, whose write runs in the project's
//! actor, so a handler never builds a message for it.

use super::track::{self, Track, TrackOutcome};
use crate::error::Result;
use crate::model::ProjectId;
use crate::project::apply::Apply;
use crate::project::Registry;

/// Records the event and creates or updates its contact, answered once durable.
pub async fn track(registry: &Registry, p: ProjectId, req: Track) -> Result<TrackOutcome> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, counts| track::track(ctx, counts, req)),
        )
        .await
}
