//! The send use case: what /v1/send (and, later, a campaign or a workflow step) calls to
//! queue emails. Each recipient's email is rendered here, off the project actor, with
//! the contact as the project's contact table has it; the actor then upserts the
//! recipients and writes the emails in one visit, unless a recipient changed since it
//! was read (then the send renders again). So a costly template never holds an arbiter
//! that other projects share, and an ordinary send costs one actor visit.

use super::messages::QueueEmails;
use super::registry::Registry;
use super::sending::{self, Queued, Receipt, SendSpec};
use crate::error::{Error, Result};
use crate::model::{ProjectId, Timestamp};

/// Charged steps of one send's renders that run inline rather than on the pool.
const INLINE_STEPS: u64 = 5_000;

/// Renders of one send before it gives up on recipients that keep changing.
const MAX_RENDERS: usize = 5;

pub async fn send(registry: &Registry, project: ProjectId, spec: SendSpec) -> Result<Receipt> {
    let table = registry.contacts(project);
    let mut spec = spec;
    for _ in 0..MAX_RENDERS {
        let now = Timestamp::from(registry.clock().now());
        let recipients = sending::recipients(&table, &spec, now)?;
        // Each recipient's render is charged first (a 422 here means it would pass a
        // limit). Renders charged at a few thousand steps in all take microseconds:
        // they run right here (an HTTP worker, never an actor). Costlier ones go to the
        // render pool, so a slow one holds neither an actor nor a worker that other
        // projects' requests need.
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
        match registry
            .send(project, QueueEmails { spec, rendered })
            .await?
        {
            Queued::Done(receipt) => return Ok(receipt),
            Queued::Stale(back) => spec = *back,
        }
    }
    // Recipients that change faster than their emails render: let the client come back.
    Err(Error::Busy {
        retry_after_secs: 1,
    })
}
