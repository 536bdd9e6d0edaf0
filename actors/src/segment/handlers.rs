//! The project actor's handlers of the segment writes that also change the actor's own
//! state (its `TrackedSegments`, the segments it keeps compiled), which an `Apply` cannot
//! reach. The messages are the engine's own: the edge calls `segment::actions`.

use actix::{Handler, Message, ResponseFuture};

use super::membership::TrackedSegments;
use super::records::{self as segments, CreateSegment, UpdateSegment};
use super::Segment;
use crate::error::Result;
use crate::model::SegmentId;
use crate::project::counters::read_counter;
use crate::project::limits;
use crate::project::ProjectActor;

#[derive(Debug, Message)]
#[rtype(result = "Result<Segment>")]
pub(crate) struct Create(pub(crate) CreateSegment);

#[derive(Debug, Message)]
#[rtype(result = "Result<Segment>")]
pub(crate) struct Update(pub(crate) UpdateSegment);

#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub(crate) struct Delete(pub(crate) SegmentId);

impl Handler<Create> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, Create(msg): Create, _ctx: &mut Self::Context) -> Self::Result {
        let result = check_segment_room(self, true, msg.track_membership).and_then(|()| {
            let (ctx, _) = self.ctx();
            segments::create(&ctx, msg)
        });
        let result = result.and_then(|segment| {
            TrackedSegments::of_mut(&mut self.states)?.put(segment.clone());
            Ok(segment)
        });
        self.after_flush(result)
    }
}

impl Handler<Update> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, Update(msg): Update, _ctx: &mut Self::Context) -> Self::Result {
        let starts_tracking = msg.track_membership == Some(true)
            && TrackedSegments::of(&self.states)
                .is_ok_and(|a| a.get(msg.id).is_some_and(|e| !e.segment.track_membership));
        let result = check_segment_room(self, false, starts_tracking).and_then(|()| {
            let (ctx, _) = self.ctx();
            segments::update(&ctx, msg)
        });
        let result = result.and_then(|segment| {
            TrackedSegments::of_mut(&mut self.states)?.put(segment.clone());
            Ok(segment)
        });
        self.after_flush(result)
    }
}

impl Handler<Delete> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, Delete(id): Delete, _ctx: &mut Self::Context) -> Self::Result {
        let result = TrackedSegments::of(&self.states).map(drop).and_then(|()| {
            let (ctx, _) = self.ctx();
            segments::delete(&ctx, id)
        });
        let result = result.and_then(|()| {
            TrackedSegments::of_mut(&mut self.states)?.remove(id);
            Ok(())
        });
        self.after_flush(result)
    }
}

/// Whether one more segment (`new`) or one more tracked segment fits the limits; first
/// of all, whether the actor keeps the segments (an engine built without `wiring`'s
/// hooks does not), so that nothing is written that the actor would not know of.
fn check_segment_room(actor: &ProjectActor, new: bool, tracked: bool) -> Result<()> {
    let audience = TrackedSegments::of(&actor.states)?;
    let l = &actor.limits;
    if new
        && read_counter(&*actor.store, actor.project, segments::SEGMENTS_COUNTER)? >= l.max_segments
    {
        return Err(limits::full("segments", l.max_segments, "max_segments"));
    }
    if tracked && audience.tracked_count() >= l.max_tracked_segments {
        return Err(limits::full(
            "tracked segments",
            l.max_tracked_segments as u64,
            "max_tracked_segments",
        ));
    }
    Ok(())
}
