//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

use super::records::{self as contacts, PatchContact, UpsertContact, UpsertOutcome};
use crate::error::Result;
use crate::model::Contact;
use crate::project::ProjectActor;

impl Handler<UpsertContact> for ProjectActor {
    type Result = ResponseFuture<Result<UpsertOutcome>>;

    fn handle(&mut self, msg: UpsertContact, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = contacts::upsert(&ctx, counts, msg);
        self.after_flush(result)
    }
}

impl Handler<PatchContact> for ProjectActor {
    type Result = ResponseFuture<Result<Contact>>;

    fn handle(&mut self, msg: PatchContact, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = contacts::patch(&ctx, counts, msg);
        self.after_flush(result)
    }
}
