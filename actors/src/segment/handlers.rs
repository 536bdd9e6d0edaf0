//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

use super::membership::Audience;
use super::records::{
    self as segments, ChangeMembers, CreateSegment, DeleteSegment, MembersOutcome, UpdateSegment,
};
use super::Segment;
use crate::error::Result;
use crate::project::counters::read_counter;
use crate::project::limits;
use crate::project::ProjectActor;

impl Handler<CreateSegment> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, msg: CreateSegment, _ctx: &mut Self::Context) -> Self::Result {
        let result = check_segment_room(self, true, msg.track_membership).and_then(|()| {
            let (ctx, _) = self.ctx();
            segments::create(&ctx, msg)
        });
        let result = result.and_then(|segment| {
            Audience::of_mut(&mut self.states)?.put(segment.clone());
            Ok(segment)
        });
        self.after_flush(result)
    }
}

impl Handler<UpdateSegment> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, msg: UpdateSegment, _ctx: &mut Self::Context) -> Self::Result {
        let starts_tracking = msg.track_membership == Some(true)
            && Audience::of(&self.states)
                .is_ok_and(|a| a.get(msg.id).is_some_and(|e| !e.segment.track_membership));
        let result = check_segment_room(self, false, starts_tracking).and_then(|()| {
            let (ctx, _) = self.ctx();
            segments::update(&ctx, msg)
        });
        let result = result.and_then(|segment| {
            Audience::of_mut(&mut self.states)?.put(segment.clone());
            Ok(segment)
        });
        self.after_flush(result)
    }
}

impl Handler<DeleteSegment> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteSegment, _ctx: &mut Self::Context) -> Self::Result {
        let result = Audience::of(&self.states).map(drop).and_then(|()| {
            let (ctx, _) = self.ctx();
            segments::delete(&ctx, msg.id)
        });
        let result = result.and_then(|()| {
            Audience::of_mut(&mut self.states)?.remove(msg.id);
            Ok(())
        });
        self.after_flush(result)
    }
}

impl Handler<ChangeMembers> for ProjectActor {
    type Result = ResponseFuture<Result<MembersOutcome>>;

    fn handle(&mut self, msg: ChangeMembers, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, _) = self.ctx();
        let result = segments::change_members(&ctx, msg.id, &msg.emails, msg.add);
        self.after_flush(result)
    }
}

/// Whether one more segment (`new`) or one more tracked segment fits the limits; first
/// of all, whether the actor keeps the segments (an engine built without `wiring`'s
/// hooks does not), so that nothing is written that the actor would not know of.
fn check_segment_room(actor: &ProjectActor, new: bool, tracked: bool) -> Result<()> {
    let audience = Audience::of(&actor.states)?;
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
