//! Template records: written in the project's actor, read by id or all at once.

use crate::error::{Error, Resource, Result};
use crate::model::template::TemplatePatch;
use crate::model::{ProjectId, Template, TemplateId, Timestamp};
use crate::store::{keys, Batch, Store};

pub fn load(store: &dyn Store, p: ProjectId, id: TemplateId) -> Result<Option<Template>> {
    store
        .get(&keys::template(p, id))?
        .map(|b| decode(store, p, &b))
        .transpose()
}

/// Every template of a project, newest first. Templates are few per project (bounded
/// by `limits.max_templates`), so a list is filtered and paged from this whole.
pub fn all(store: &dyn Store, p: ProjectId) -> Result<Vec<Template>> {
    store
        .scan(&keys::templates(p), None, true)
        .map(|kv| decode(store, p, &kv?.1))
        .collect()
}

/// Every template of a project, oldest first, read as the walk goes (an export).
pub fn each(store: &dyn Store, p: ProjectId) -> impl Iterator<Item = Result<Template>> + '_ {
    store
        .scan(&keys::templates(p), None, false)
        .map(move |kv| decode(store, p, &kv?.1))
}

/// A stored template record with its text part (kept apart, see `keys::template_text`).
pub fn decode(store: &dyn Store, p: ProjectId, record: &[u8]) -> Result<Template> {
    let mut t = Template::decode(record)?;
    t.text = store
        .get(&keys::template_text(p, t.id))?
        .and_then(|b| String::from_utf8(b).ok());
    Ok(t)
}

fn put(batch: &mut Batch, p: ProjectId, t: &Template) -> Result<()> {
    batch.put(keys::template(p, t.id), t.encode()?);
    match &t.text {
        Some(text) => batch.put(keys::template_text(p, t.id), text.as_bytes().to_vec()),
        None => batch.delete(keys::template_text(p, t.id)),
    }
    Ok(())
}

pub fn create(store: &dyn Store, p: ProjectId, t: Template) -> Result<Template> {
    let mut batch = Batch::new();
    put(&mut batch, p, &t)?;
    store.apply(batch)?;
    Ok(t)
}

/// The patch was compiled before (`actions::update`), off the actor (subject and body are separate
/// templates, so each checks on its own).
pub fn update(
    store: &dyn Store,
    p: ProjectId,
    id: TemplateId,
    patch: TemplatePatch,
    now: Timestamp,
) -> Result<Template> {
    let mut t = load(store, p, id)?.ok_or(Error::NotFound(Resource::Template))?;
    t.apply(patch, now);
    let mut batch = Batch::new();
    put(&mut batch, p, &t)?;
    store.apply(batch)?;
    Ok(t)
}

pub fn delete(store: &dyn Store, p: ProjectId, id: TemplateId) -> Result<()> {
    load(store, p, id)?.ok_or(Error::NotFound(Resource::Template))?;
    let mut batch = Batch::new();
    batch.delete(keys::template(p, id));
    batch.delete(keys::template_text(p, id));
    store.apply(batch).map(drop)
}
