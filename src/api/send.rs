//! The typed requests and views of the send endpoints (handled in
//! `http/send.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::model::DataMap;
use mailroom_actors::model::EmailAddress;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::api::wire::{DisplayName, Subject, Text};
use mailroom_actors::json_part;

pub const MAX_ATTACHMENTS: usize = 10;
pub const MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;
pub const MAX_SUBJECT: usize = 998;
pub const MAX_BODY: usize = 5 << 20;
pub const MAX_RECIPIENTS: usize = 100;
pub const MAX_NAME: usize = 200;

/// `{name, email}` or a bare address.
pub fn mailbox_schema() -> Value {
    // The one schema of an address, EmailAddress's own.
    let address = json!({"$ref": "#/components/schemas/EmailAddress"});
    json!({"anyOf": [
        address,
        {"type": "object", "required": ["email"], "properties": {
            "email": address,
            // Blank is no name; a control character is refused (see `DisplayName`).
            "name": {"type": ["string", "null"], "maxLength": MAX_NAME,
                     "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]*$"},
        }},
    ]})
}

json_part!(
    /// An address, `{name, email}`, or an array of 1 to 100 of either.
    Recipients,
    "Recipients",
    json!({"anyOf": [
        mailbox_schema(),
        {"type": "array", "minItems": 1, "maxItems": MAX_RECIPIENTS, "items": mailbox_schema()},
    ]})
);
json_part!(
    /// An address or `{name, email}`.
    Sender,
    "Sender",
    mailbox_schema()
);
json_part!(
    /// Extra headers: single-line values; the headers Mailroom sets itself are refused.
    Headers,
    "Headers",
    json!({"type": "object", "propertyNames": {"pattern": "^[!-9;-~]{1,76}$"},
           "additionalProperties": {"type": "string", "maxLength": MAX_SUBJECT, "pattern": "^[^\\r\\n]*$"}})
);
json_part!(
    /// At most 10, and 10 MB in all after decoding.
    Attachments,
    "Attachments",
    json!({"type": "array", "maxItems": MAX_ATTACHMENTS, "items": {
        "type": "object", "required": ["filename", "content"], "properties": {
            "filename": {"type": "string", "pattern": "\\S", "description": "Cut to 255 characters"},
            "content": {"type": "string", "contentEncoding": "base64",
                        "pattern": "^\\s*([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)\\s*$", "minLength": 1},
            "contentType": {"type": ["string", "null"]},
        }}})
);

/// Request body of POST /v1/send.
#[derive(Deserialize, ToSchema)]
pub struct SendRequest {
    /// Optional to serde only, so that the rest parses and one 422 names every problem.
    #[schema(required = true, nullable = false)]
    pub to: Option<Recipients>,
    pub subject: Option<Subject>,
    pub body: Option<SendHtml>,
    /// The text/plain part, instead of the one made from the HTML: a template rendered
    /// with the same variables as the body, and not HTML-escaped (like the subject).
    pub text: Option<SendText>,
    /// A template id; its subject, body, from and reply-to are used unless given here.
    pub template: Option<TemplateRef>,
    /// Its domain must be a verified domain of the project.
    pub from: Option<Sender>,
    /// The sender's display name.
    pub name: Option<DisplayName>,
    /// For a recipient that is a new contact; default false.
    pub subscribed: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub data: Option<DataMap>,
    pub headers: Option<Headers>,
    pub reply: Option<EmailAddress>,
    pub attachments: Option<Attachments>,
    /// How `body` is written: `html` (the default) or `markdown`, which is turned into
    /// HTML and then rendered as a template. A template's own body is always HTML.
    #[serde(rename = "type")]
    pub body_type: Option<BodyType>,
}

/// The language of a /v1/send body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BodyType {
    Html,
    Markdown,
}

type SendHtml = Text<MAX_BODY>;
type SendText = Text<MAX_BODY>;
type TemplateRef = Text<64>;

#[derive(Serialize, ToSchema)]
pub struct SendResponse {
    pub success: bool,
    pub data: SendAnswer,
}

#[derive(Serialize, ToSchema)]
pub struct SendAnswer {
    pub emails: Vec<SentEmail>,
    pub timestamp: String,
}

/// One recipient: its contact, and its email's id (none when it was skipped).
#[derive(Serialize, ToSchema)]
pub struct SentEmail {
    pub contact: SentContact,
    pub email: Option<String>,
    /// Why nothing was sent to it: `unsubscribed` (a MARKETING template) or
    /// `suppressed` (the address is on the suppression list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// True when the address is on the suppression list (then `email` is null).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub suppressed: bool,
    /// Why the address is suppressed: hard_bounce, soft_bounce, complaint or manual.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct SentContact {
    pub id: String,
    pub email: String,
}

#[derive(Serialize, ToSchema)]
pub struct EmailResponse {
    pub success: bool,
    pub data: EmailView,
}

/// An email record (API.md section 5, beyond the spec).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmailView {
    pub id: String,
    pub to: String,
    pub from: String,
    pub subject: String,
    /// QUEUED, SENDING, SENT, FAILED or BOUNCED.
    pub status: &'static str,
    pub contact_id: String,
    pub campaign_id: Option<String>,
    pub workflow_execution_id: Option<String>,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub created_at: String,
    pub sent_at: Option<String>,
    pub opened_at: Option<String>,
    pub clicked_at: Option<String>,
    pub opens: u32,
    pub clicks: u32,
    /// Whether retention removed the email's content (`retention.email_content_days`):
    /// the record stays, without its HTML, custom headers and attachments.
    pub content_removed: bool,
}
