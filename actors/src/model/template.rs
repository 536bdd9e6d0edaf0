//! A stored email template. Subject and body use the `{{variable}}` syntax of API.md
//! section 4 (see `render`); a template that does not compile is never stored.

use serde::{Deserialize, Serialize};

use super::{EmailAddress, TemplateId, Timestamp};
use crate::error::{Error, Result};

/// On the wire TRANSACTIONAL or MARKETING (the store keeps the variant's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TemplateKind {
    Transactional,
    Marketing,
}

impl TemplateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateKind::Transactional => "TRANSACTIONAL",
            TemplateKind::Marketing => "MARKETING",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "TRANSACTIONAL" => Some(TemplateKind::Transactional),
            "MARKETING" => Some(TemplateKind::Marketing),
            _ => None,
        }
    }
}

/// What a caller chooses of a new template; the engine gives it its id and times
/// (`template::actions::create`).
#[derive(Debug, Clone)]
pub struct NewTemplate {
    pub name: String,
    pub description: Option<String>,
    pub subject: String,
    pub body: String,
    pub text: Option<String>,
    pub kind: TemplateKind,
    pub from: Option<EmailAddress>,
    pub from_name: Option<String>,
    pub reply_to: Option<EmailAddress>,
}

impl NewTemplate {
    /// The template as it is stored first, made and changed `now`.
    pub(crate) fn made(self, now: Timestamp) -> Template {
        Template {
            id: TemplateId::new(),
            name: self.name,
            description: self.description,
            subject: self.subject,
            body: self.body,
            text: self.text,
            kind: self.kind,
            from: self.from,
            from_name: self.from_name,
            reply_to: self.reply_to,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub id: TemplateId,
    pub name: String,
    pub description: Option<String>,
    pub subject: String,
    pub body: String,
    /// The text/plain part of its emails; None: made from the body. Not in `Stored`: it
    /// is kept under `keys::template_text` (see `template::records`).
    pub text: Option<String>,
    pub kind: TemplateKind,
    pub from: Option<EmailAddress>,
    pub from_name: Option<String>,
    pub reply_to: Option<EmailAddress>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The fields an update may change; None leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct TemplatePatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub text: Option<String>,
    pub kind: Option<TemplateKind>,
    pub from: Option<EmailAddress>,
    pub from_name: Option<String>,
    pub reply_to: Option<EmailAddress>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    id: TemplateId,
    name: String,
    description: Option<String>,
    subject: String,
    body: String,
    kind: TemplateKind,
    from: Option<String>,
    from_name: Option<String>,
    reply_to: Option<String>,
    created_at: i64,
    updated_at: i64,
}

fn email(s: Option<String>) -> Result<Option<EmailAddress>> {
    s.map(|e| {
        EmailAddress::parse(&e).map_err(|_| Error::storage("stored template has a bad address"))
    })
    .transpose()
}

impl Template {
    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::codec::encode(&Stored {
            id: self.id,
            name: self.name.clone(),
            description: self.description.clone(),
            subject: self.subject.clone(),
            body: self.body.clone(),
            kind: self.kind,
            from: self.from.as_ref().map(|e| e.to_string()),
            from_name: self.from_name.clone(),
            reply_to: self.reply_to.as_ref().map(|e| e.to_string()),
            created_at: self.created_at.millis(),
            updated_at: self.updated_at.millis(),
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let s: Stored = crate::codec::decode(bytes)?;
        Ok(Template {
            id: s.id,
            name: s.name,
            description: s.description,
            subject: s.subject,
            body: s.body,
            text: None,
            kind: s.kind,
            from: email(s.from)?,
            from_name: s.from_name,
            reply_to: email(s.reply_to)?,
            created_at: s.created_at.into(),
            updated_at: s.updated_at.into(),
        })
    }

    pub fn apply(&mut self, p: TemplatePatch, now: Timestamp) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = p.$f { self.$f = v; } )* };
        }
        set!(name, subject, body, kind);
        macro_rules! set_opt {
            ($($f:ident),*) => { $( if p.$f.is_some() { self.$f = p.$f; } )* };
        }
        set_opt!(description, text, from, from_name, reply_to);
        self.updated_at = now;
    }
}
