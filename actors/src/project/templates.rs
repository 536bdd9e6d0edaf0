//! Template writes.

use crate::error::{Error, Resource, Result};
use crate::model::{ProjectId, Template, TemplateId, Timestamp};
use crate::store::{keys, Batch, Store};
use actix::Message;

pub fn load(store: &dyn Store, p: ProjectId, id: TemplateId) -> Result<Option<Template>> {
    store
        .get(&keys::template(p, id))?
        .map(|b| Template::decode(&b))
        .transpose()
}

pub fn create(store: &dyn Store, p: ProjectId, t: Template) -> Result<Template> {
    let mut batch = Batch::new();
    batch.put(keys::template(p, t.id), t.encode()?);
    store.apply(batch)?;
    Ok(t)
}

/// The patch was compiled at the edge, off the actor (subject and body are separate
/// templates, so each checks on its own).
pub fn update(
    store: &dyn Store,
    p: ProjectId,
    msg: UpdateTemplate,
    now: Timestamp,
) -> Result<Template> {
    let mut t = load(store, p, msg.id)?.ok_or(Error::NotFound(Resource::Template))?;
    t.apply(msg.patch, now);
    let mut batch = Batch::new();
    batch.put(keys::template(p, t.id), t.encode()?);
    store.apply(batch)?;
    Ok(t)
}

pub fn delete(store: &dyn Store, p: ProjectId, id: TemplateId) -> Result<()> {
    load(store, p, id)?.ok_or(Error::NotFound(Resource::Template))?;
    let mut batch = Batch::new();
    batch.delete(keys::template(p, id));
    store.apply(batch)
}

/// Stores a new template (already compiled once at the edge).
#[derive(Debug, Message)]
#[rtype(result = "Result<crate::model::Template>")]
pub struct CreateTemplate(pub crate::model::Template);

#[derive(Debug, Message)]
#[rtype(result = "Result<crate::model::Template>")]
pub struct UpdateTemplate {
    pub id: crate::model::TemplateId,
    pub patch: crate::model::template::TemplatePatch,
}

#[derive(Debug, Message)]
#[rtype(result = "Result<()>")]
pub struct DeleteTemplate {
    pub id: crate::model::TemplateId,
}
