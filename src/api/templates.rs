//! The typed requests and views of the templates endpoints (handled in
//! `http/templates.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::engine::templates::{Template, TemplateKind};
use mailroom_actors::model::EmailAddress;
use mailroom_actors::model::Page;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::wire::{Description, DisplayName, Html, Name, Subject};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateView {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub subject: String,
    pub body: String,
    /// The text/plain part of its emails; null: made from the body.
    pub text: Option<String>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub from: Option<String>,
    pub from_name: Option<String>,
    pub reply_to: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Template> for TemplateView {
    fn from(t: &Template) -> Self {
        TemplateView {
            id: t.id.to_string(),
            name: t.name.clone(),
            description: t.description.clone(),
            subject: t.subject.clone(),
            body: t.body.clone(),
            text: t.text.clone(),
            kind: t.kind.as_str(),
            from: t.from.as_ref().map(|e| e.to_string()),
            from_name: t.from_name.clone(),
            reply_to: t.reply_to.as_ref().map(|e| e.to_string()),
            created_at: t.created_at.to_iso(),
            updated_at: t.updated_at.to_iso(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateList {
    pub templates: Vec<TemplateView>,
    pub cursor: Option<String>,
    pub has_more: bool,
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
    pub total_pages: u64,
}

impl TemplateList {
    /// The paged shape of every list, with Plunk's page numbers beside it: `before`
    /// templates match ahead of this page, `limit` to a page.
    pub fn of(page: Page<TemplateView>, before: usize, limit: usize) -> Self {
        let total = page.total;
        TemplateList {
            has_more: page.has_more(),
            cursor: page.next_cursor,
            templates: page.items,
            total,
            page: (before / limit) as u64 + 1,
            page_size: limit as u64,
            total_pages: total.div_ceil(limit as u64),
        }
    }
}

/// Request body of POST /templates.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTemplateRequest {
    pub name: Name,
    pub subject: Subject,
    /// HTML, with `{{variable}}`, `{{ data.x }}` and `{{x ?? "fallback"}}`.
    pub body: Html,
    /// The text/plain part of its emails, a template like the body but not HTML-escaped;
    /// without it the part is made from the HTML.
    pub text: Option<Html>,
    /// TRANSACTIONAL (default) or MARKETING.
    #[serde(rename = "type")]
    pub kind: Option<TemplateKind>,
    pub from: Option<EmailAddress>,
    pub from_name: Option<DisplayName>,
    pub reply_to: Option<EmailAddress>,
    pub description: Option<Description>,
}

/// Request body of PATCH /templates/{id}: the fields to change.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTemplateRequest {
    pub name: Option<Name>,
    pub subject: Option<Subject>,
    pub body: Option<Html>,
    pub text: Option<Html>,
    #[serde(rename = "type")]
    pub kind: Option<TemplateKind>,
    pub from: Option<EmailAddress>,
    pub from_name: Option<DisplayName>,
    pub reply_to: Option<EmailAddress>,
    pub description: Option<Description>,
}
