//! The contact writes the edge calls, one function each: the write runs in the
//! project's actor, so a handler never builds a message for it. (A delete is an
//! erasure: `erasure::runner::delete_contact`.)

use super::records::{self as contacts, PatchContact, UpsertContact, UpsertOutcome};
use crate::error::Result;
use crate::model::{Contact, ProjectId};
use crate::project::apply::Apply;
use crate::project::Registry;

/// Creates or updates the contact of `req.email`, answered once durable.
pub async fn upsert(
    registry: &Registry,
    p: ProjectId,
    req: UpsertContact,
) -> Result<UpsertOutcome> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, counts| contacts::upsert(ctx, counts, req)),
        )
        .await
}

/// Changes the subscription or the data of the contact `req.id` (404 when it is gone).
pub async fn patch(registry: &Registry, p: ProjectId, req: PatchContact) -> Result<Contact> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, counts| contacts::patch(ctx, counts, req)),
        )
        .await
}
