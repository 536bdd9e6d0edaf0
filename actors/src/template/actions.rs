//! The template use cases the edge calls, one function each: the subject, body and
//! text compile on the render pool (off the actor), then the write runs in the
//! project's actor, so a handler never builds a message for it.

use super::records as templates;
use crate::error::Result;
use crate::model::template::TemplatePatch;
use crate::model::{NewTemplate, ProjectId, Template, TemplateId, Timestamp};
use crate::project::actor::check_room;
use crate::project::apply::Apply;
use crate::project::Registry;
use crate::render::TemplateCache;
use crate::store::keys;

/// Stores a new template once it compiles (422 `template_syntax` with the line).
/// Makes a template of `new`, with its id and times.
pub async fn create(registry: &Registry, p: ProjectId, new: NewTemplate) -> Result<Template> {
    let t = new.made(Timestamp::from(registry.clock().now()));
    registry
        .renders()
        .compile_with_text(t.subject.clone(), t.body.clone(), t.text.clone())
        .await?;
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                let max = ctx.limits.max_templates;
                check_room(ctx.store, &keys::templates(ctx.project), max, "templates")?;
                templates::create(ctx.store, ctx.project, t)
            }),
        )
        .await
}

/// Applies the patch once what it gives compiles, and drops the cached compilation.
pub async fn update(
    registry: &Registry,
    cache: &TemplateCache,
    p: ProjectId,
    id: TemplateId,
    patch: TemplatePatch,
) -> Result<Template> {
    // Subject and body compile as separate templates, so each given one is checked on
    // its own (an empty one stands in for the other).
    if patch.subject.is_some() || patch.body.is_some() || patch.text.is_some() {
        registry
            .renders()
            .compile_with_text(
                patch.subject.clone().unwrap_or_default(),
                patch.body.clone().unwrap_or_default(),
                patch.text.clone(),
            )
            .await?;
    }
    let t = registry
        .send(
            p,
            Apply::durable(move |ctx, _| {
                templates::update(ctx.store, ctx.project, id, patch, ctx.now)
            }),
        )
        .await?;
    cache.invalidate(id);
    Ok(t)
}

pub async fn delete(
    registry: &Registry,
    cache: &TemplateCache,
    p: ProjectId,
    id: TemplateId,
) -> Result<()> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| templates::delete(ctx.store, ctx.project, id)),
        )
        .await?;
    cache.invalidate(id);
    Ok(())
}
