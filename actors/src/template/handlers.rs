//! The project actor's handlers of this feature's messages: the actor (`project::actor`)
//! knows no feature, so each feature answers its own messages through its write context.

use actix::{Handler, ResponseFuture};

use super::records::{self as templates, CreateTemplate, DeleteTemplate, UpdateTemplate};
use crate::error::Result;
use crate::model::Template;
use crate::project::actor::check_room;
use crate::project::ProjectActor;
use crate::store::keys;

impl Handler<CreateTemplate> for ProjectActor {
    type Result = ResponseFuture<Result<Template>>;

    fn handle(&mut self, msg: CreateTemplate, _ctx: &mut Self::Context) -> Self::Result {
        let max = self.limits.max_templates;
        let result = check_room(
            &*self.store,
            &keys::templates(self.project),
            max,
            "templates",
        )
        .and_then(|()| templates::create(&*self.store, self.project, msg.0));
        self.after_flush(result)
    }
}

impl Handler<UpdateTemplate> for ProjectActor {
    type Result = ResponseFuture<Result<Template>>;

    fn handle(&mut self, msg: UpdateTemplate, _ctx: &mut Self::Context) -> Self::Result {
        let now = self.now();
        let result = templates::update(&*self.store, self.project, msg, now);
        self.after_flush(result)
    }
}

impl Handler<DeleteTemplate> for ProjectActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteTemplate, _ctx: &mut Self::Context) -> Self::Result {
        let result = templates::delete(&*self.store, self.project, msg.id);
        self.after_flush(result)
    }
}
