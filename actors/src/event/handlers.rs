//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

use super::track::{self, Track, TrackOutcome};
use crate::error::Result;
use crate::project::ProjectActor;

impl Handler<Track> for ProjectActor {
    type Result = ResponseFuture<Result<TrackOutcome>>;

    fn handle(&mut self, msg: Track, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = track::track(&ctx, counts, msg);
        self.after_flush(result)
    }
}
