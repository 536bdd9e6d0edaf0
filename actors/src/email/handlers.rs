//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

use super::sending::{self, QueueEmails, RecordDelivery};
use crate::error::Result;
use crate::project::ProjectActor;

impl Handler<QueueEmails> for ProjectActor {
    type Result = ResponseFuture<Result<sending::Queued>>;

    fn handle(&mut self, msg: QueueEmails, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = sending::queue(&ctx, counts, msg.spec, msg.rendered);
        let reply = self.after_flush(result);
        let outbox = self.outbox.clone();
        Box::pin(async move {
            let queued = reply.await?;
            // Only durable entries are announced, so the dispatcher never sends one
            // that a crash could still take back.
            if matches!(queued, sending::Queued::Done(_)) {
                outbox.notify_one();
            }
            Ok(queued)
        })
    }
}

/// Delivery outcomes need not wait for a flush: losing one in a crash only means the
/// email is tried again, which the contract allows for emails in flight at a crash.
impl Handler<RecordDelivery> for ProjectActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: RecordDelivery, _ctx: &mut Self::Context) -> Result<()> {
        let (ctx, counts) = self.ctx();
        let result = sending::record(&ctx, counts, msg);
        // Nobody waits for this write, but it should reach the log soon: asking for a
        // flush schedules one.
        self.flush_soon();
        result
    }
}
