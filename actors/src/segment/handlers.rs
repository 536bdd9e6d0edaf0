//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

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
        let now = self.now();
        let result = check_segment_room(self, true, msg.track_membership).and_then(|()| {
            segments::create(&*self.store, self.project, now, &mut self.audience, msg)
        });
        self.after_flush(result)
    }
}

impl Handler<UpdateSegment> for ProjectActor {
    type Result = ResponseFuture<Result<Segment>>;

    fn handle(&mut self, msg: UpdateSegment, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let starts_tracking = msg.track_membership == Some(true)
            && self
                .audience
                .get(msg.id)
                .is_some_and(|e| !e.segment.track_membership);
        let result = check_segment_room(self, false, starts_tracking).and_then(|()| {
            segments::update(
                &*self.store,
                &self.starts,
                self.project,
                now,
                &mut self.audience,
                msg,
            )
        });
        self.after_flush(result)
    }
}

impl Handler<DeleteSegment> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteSegment, _ctx: &mut Self::Context) -> Self::Result {
        let result = segments::delete(&*self.store, self.project, &mut self.audience, msg.id);
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

/// Whether one more segment (`new`) or one more tracked segment fits the limits.
fn check_segment_room(actor: &ProjectActor, new: bool, tracked: bool) -> Result<()> {
    let l = &actor.limits;
    if new
        && read_counter(&*actor.store, actor.project, segments::SEGMENTS_COUNTER)? >= l.max_segments
    {
        return Err(limits::full("segments", l.max_segments, "max_segments"));
    }
    if tracked && actor.audience.tracked_count() >= l.max_tracked_segments {
        return Err(limits::full(
            "tracked segments",
            l.max_tracked_segments as u64,
            "max_tracked_segments",
        ));
    }
    Ok(())
}
