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

/// The answer waits until the outcome is durable, and the dispatcher keeps the email's
/// in-flight slot until then: so at a crash the emails that can go out again are at most
/// `sending.max_in_flight`, those handed to a mailer, and not also every outcome of the
/// last moments that the log had not synced yet (a kill -9 under load re-sent 47 of a
/// campaign's emails with 32 slots when outcomes were answered before their flush).
impl Handler<RecordDelivery> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: RecordDelivery, _ctx: &mut Self::Context) -> Self::Result {
        let (ctx, counts) = self.ctx();
        let result = sending::record(&ctx, counts, msg);
        self.after_flush(result)
    }
}
