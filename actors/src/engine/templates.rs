//! The templates' door.

pub use crate::model::template::TemplatePatch;
pub use crate::model::{NewTemplate, Template, TemplateKind};

use super::{off_thread, Engine};
use crate::error::FieldCode;
use crate::error::{Error, Resource, Result};
use crate::model::{EmailAddress, Page, PageRequest, ProjectId, TemplateId};
use crate::template::{actions, records};

/// Which templates a list shows: of one kind, and whose name contains `search` (in any
/// case; blank is none).
#[derive(Debug, Default)]
pub struct TemplateFilter {
    pub kind: Option<TemplateKind>,
    pub search: Option<String>,
}

/// `engine.templates()`.
pub struct Templates<'e>(pub(super) &'e Engine);

impl Templates<'_> {
    /// A template made of `new` (its subject and body compile).
    pub async fn create(&self, p: ProjectId, new: NewTemplate) -> Result<Template> {
        actions::create(&self.0.registry, p, new).await
    }

    /// The template, or 404.
    pub fn get(&self, p: ProjectId, id: TemplateId) -> Result<Template> {
        records::load(&*self.0.store, p, id)?.ok_or(Error::NotFound(Resource::Template))
    }

    /// Every template of the project, newest first. Templates are few per project: one
    /// scan gives a page, the total and the position.
    pub async fn all(&self, p: ProjectId) -> Result<Vec<Template>> {
        let store = self.0.store.clone();
        off_thread(move || records::all(&*store, p)).await
    }

    /// One page of the templates `filter` matches, newest first, and how many match
    /// before it (a page number's base: Plunk's answer numbers its pages).
    pub async fn list(
        &self,
        p: ProjectId,
        filter: TemplateFilter,
        page: PageRequest,
    ) -> Result<(Page<Template>, usize)> {
        let cursor = match page.cursor() {
            Some(c) => Some(
                c.parse::<TemplateId>()
                    .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?,
            ),
            None => None,
        };
        let search = filter
            .search
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty());
        let matching: Vec<Template> = self
            .all(p)
            .await?
            .into_iter()
            .filter(|t| filter.kind.is_none_or(|k| t.kind == k))
            .filter(|t| {
                search
                    .as_deref()
                    .is_none_or(|s| t.name.to_lowercase().contains(s))
            })
            .collect();
        let before = cursor.map_or(0, |c| matching.iter().take_while(|t| t.id >= c).count());
        let total = matching.len() as u64;
        let fetched = matching
            .into_iter()
            .skip(before)
            .take(page.limit() + 1)
            .collect();
        Ok((
            Page::of(fetched, &page, total, |t| t.id.to_string()),
            before,
        ))
    }

    pub async fn update(
        &self,
        p: ProjectId,
        id: TemplateId,
        patch: TemplatePatch,
    ) -> Result<Template> {
        actions::update(&self.0.registry, &self.0.templates, p, id, patch).await
    }

    pub async fn delete(&self, p: ProjectId, id: TemplateId) -> Result<()> {
        actions::delete(&self.0.registry, &self.0.templates, p, id).await
    }

    /// `subject` and `body` rendered as an email to the project's contact of address
    /// `to` would be (to a stand-in with no data when None), in the render sandbox with
    /// its limits: the subject and the HTML. The template compiles first; then `to` must
    /// be an address (422 on `contact`) of a contact (404).
    pub async fn preview(
        &self,
        p: ProjectId,
        subject: String,
        body: String,
        to: Option<&str>,
    ) -> Result<(String, String)> {
        let renders = self.0.registry.renders();
        let compiled = renders.compile(subject, body).await?;
        let to = to
            .map(|raw| {
                EmailAddress::parse(raw).map_err(|_| {
                    Error::field(
                        "contact",
                        crate::error::FieldCode::InvalidString,
                        "Invalid email",
                    )
                })
            })
            .transpose()?;
        let vars = match &to {
            None => serde_json::json!({
                "email": "someone@example.com",
                "data": {},
                "contact": {"email": "someone@example.com"}
            }),
            Some(email) => {
                let store = &*self.0.store;
                let id = crate::contact::records::find_id_by_email(store, p, email.as_str())?
                    .ok_or(Error::NotFound(Resource::Contact))?;
                let contact = crate::contact::queries::get_contact(store, p, id)?
                    .ok_or(Error::NotFound(Resource::Contact))?;
                crate::email::sending::variables(&contact, &serde_json::Map::new())
            }
        };
        renders.run(move || compiled.render(&vars)).await?
    }
}
