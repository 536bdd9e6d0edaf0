//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

use super::messages::{ApplyDomainCheck, CreateDomain, TrustDomain};
use super::{records, Domain};
use crate::error::Result;
use crate::project::actor::check_room;
use crate::project::ProjectActor;
use crate::store::keys;

impl Handler<CreateDomain> for ProjectActor {
    type Result = ResponseFuture<Result<Domain>>;

    fn handle(&mut self, msg: CreateDomain, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result = check_domain_room(self)
            .and_then(|()| records::create(&*self.store, self.project, msg, now));
        self.after_flush(result)
    }
}

impl Handler<TrustDomain> for ProjectActor {
    type Result = ResponseFuture<Result<Domain>>;

    fn handle(&mut self, msg: TrustDomain, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let max = self.limits.max_domains;
        let result = records::trust_within(&*self.store, self.project, msg.0, now, max);
        self.after_flush(result)
    }
}

impl Handler<ApplyDomainCheck> for ProjectActor {
    type Result = ResponseFuture<Result<Domain>>;

    fn handle(&mut self, msg: ApplyDomainCheck, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result = records::apply_check(
            &*self.store,
            self.project,
            msg.id,
            msg.check,
            msg.return_path.as_deref(),
            now,
        );
        self.after_flush(result)
    }
}

fn check_domain_room(actor: &ProjectActor) -> Result<()> {
    let max = actor.limits.max_domains;
    check_room(&*actor.store, &keys::domains(actor.project), max, "domains")
}
