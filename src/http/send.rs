//! POST /v1/send (spec "POST /v1/send", API.md section 5) and GET /emails/{id}.

use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use mailroom_actors::engine::emails::{EmailRecord, Receipt, SendRequest as Request};
use mailroom_actors::engine::requests::{is_reserved_header, markdown_to_html};
use mailroom_actors::model::{Attachment, EmailAddress, EmailId, Engagement, TemplateId};
use mailroom_actors::{Error, FieldCode, Resource};
use serde_json::Value;

use super::auth::SecretKey;
use crate::api::body::Partial;
use crate::api::error::ApiError;
use crate::api::validate::{data_within, path_id, Fields};
use crate::api::wire::{display_name_fault, DisplayName, Text};
use crate::state::AppState;

use crate::api::send::{
    BodyType, EmailResponse, EmailView, SendAnswer, SendRequest, SendResponse, SentContact,
    SentEmail, MAX_ATTACHMENTS, MAX_ATTACHMENT_BYTES, MAX_BODY, MAX_NAME, MAX_RECIPIENTS,
    MAX_SUBJECT,
};
/// One address in a `to` or `from` form: a string or `{name, email}`.
fn mailbox(f: &mut Fields, field: &str, v: &Value) -> Option<(EmailAddress, Option<String>)> {
    let (email, name) = match v {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) => {
            let name = match o.get("name") {
                None | Some(Value::Null) => None,
                Some(Value::String(n)) => {
                    let name_field = format!("{field}.name");
                    if let Some(why) = display_name_fault(n) {
                        f.error(&name_field, FieldCode::InvalidString, why);
                        return None;
                    }
                    if n.chars().count() > MAX_NAME {
                        f.error(
                            &name_field,
                            FieldCode::TooBig,
                            format!("name must be at most {MAX_NAME} characters"),
                        );
                        return None;
                    }
                    Some(n.trim().to_owned()).filter(|n| !n.is_empty())
                }
                Some(other) => {
                    f.wrong_type(&format!("{field}.name"), "string", other);
                    return None;
                }
            };
            match o.get("email") {
                Some(Value::String(s)) => (s.as_str(), name),
                None | Some(Value::Null) => {
                    f.error(
                        &format!("{field}.email"),
                        FieldCode::InvalidType,
                        "Required",
                    );
                    return None;
                }
                Some(other) => {
                    f.wrong_type(&format!("{field}.email"), "string", other);
                    return None;
                }
            }
        }
        other => {
            f.wrong_type(field, "string or {name, email}", other);
            return None;
        }
    };
    match EmailAddress::parse(email) {
        Ok(e) => Some((e, name)),
        Err(e) => {
            f.error(field, e.code(), e.to_string());
            None
        }
    }
}

fn recipients(f: &mut Fields, to: Option<&Value>) -> Vec<(EmailAddress, Option<String>)> {
    let Some(to) = to.filter(|v| !v.is_null()) else {
        f.error("to", FieldCode::InvalidType, "Required");
        return Vec::new();
    };
    // The count first: a million recipients are refused without a look at each.
    if to.as_array().is_some_and(|a| a.len() > MAX_RECIPIENTS) {
        f.error(
            "to",
            FieldCode::TooBig,
            format!("At most {MAX_RECIPIENTS} recipients"),
        );
        return Vec::new();
    }
    let items: Vec<(String, &Value)> = match to {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("to[{i}]"), v))
            .collect(),
        single => vec![("to".to_owned(), single)],
    };
    if items.is_empty() {
        f.error(
            "to",
            FieldCode::TooSmall,
            "At least one recipient is required",
        );
    }
    if items.len() > MAX_RECIPIENTS {
        f.error(
            "to",
            FieldCode::TooBig,
            format!("At most {MAX_RECIPIENTS} recipients"),
        );
        return Vec::new();
    }
    items
        .into_iter()
        .filter_map(|(field, v)| mailbox(f, &field, v))
        .collect()
}

#[utoipa::path(post, path = "/v1/send", tag = "Public", request_body = SendRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,255}$",
            description = "1 to 255 visible ASCII characters: the same key and body within 24 h replay the first answer")),
    responses((status = 200, body = SendResponse),
              (status = 404, description = "TEMPLATE_NOT_FOUND"), (status = 422)),
    security(("bearer" = [])))]
pub async fn send(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    body: Partial<SendRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let claim = super::idempotency::claim(&req, "send", &body.json, state.idempotency_ttl_ms)?;
    let mut f = Fields::of(&body.json)?;
    f.extend(body.errors);
    // Every field of SendRequest is optional to serde, so what did not fail parsed.
    let Some(r) = body.value else {
        f.finish()?;
        return Err(Error::Internal("a parsed request went missing".into()).into());
    };
    let to = recipients(&mut f, r.to.as_ref().map(|d| &d.0));
    let from = r.from.as_ref().and_then(|d| mailbox(&mut f, "from", &d.0));
    let headers = headers(&mut f, r.headers.as_ref().map(|d| &d.0));
    let attachments = attachments(&mut f, r.attachments.as_ref().map(|d| &d.0));
    let data = r.data.unwrap_or_default();
    if let Err(e) = data_within("data", &data, state.limits.max_data_bytes) {
        f.extend_api(e);
    }
    let template = r
        .template
        .as_ref()
        .map(|id| path_id::<TemplateId>(id.as_str(), Resource::Template))
        .transpose()?;
    f.finish()?;
    // Before the Markdown: a replay does no template work.
    if let Some(receipt) = state.engine.emails().replay(p.id, claim.as_ref())? {
        return Ok(answer(receipt));
    }
    let body = match (r.body, r.body_type) {
        // A 5 MB Markdown body is real work: off the async threads.
        (Some(b), Some(BodyType::Markdown)) => Some(
            super::blocking(move || Ok(markdown_to_html(b.as_str(), MAX_BODY)))
                .await?
                .map_err(|e| Error::field("body", FieldCode::TooBig, e))?,
        ),
        (b, _) => b.map(Text::into_string),
    };
    let request = Request {
        recipients: to,
        template,
        subject: r.subject.map(Text::into_string),
        body,
        text: r.text.map(Text::into_string),
        from,
        from_name: r.name.map(DisplayName::into_string),
        reply_to: r.reply,
        subscribed: r.subscribed,
        data,
        headers,
        attachments,
        idempotency: claim,
        execution: None,
    };
    let receipt = state.engine.emails().send(p.id, request).await?;
    Ok(answer(receipt))
}

fn headers(f: &mut Fields, v: Option<&Value>) -> Vec<(String, String)> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let Some(map) = v.as_object() else {
        f.wrong_type("headers", "object", v);
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, value) in map {
        let field = format!("headers.{name}");
        let valid_name = !name.is_empty()
            && name.len() <= 76
            && name.bytes().all(|b| b.is_ascii_graphic() && b != b':');
        match value.as_str() {
            _ if !valid_name => f.error(&field, FieldCode::Custom, "Not a valid header name"),
            _ if is_reserved_header(name) => {
                f.error(&field, FieldCode::Custom, "This header is set by Mailroom")
            }
            Some(s) if s.len() <= MAX_SUBJECT && !s.contains(['\r', '\n']) => {
                out.push((name.clone(), s.to_owned()))
            }
            Some(_) => f.error(
                &field,
                FieldCode::Custom,
                "Header values are single lines of at most 998 characters",
            ),
            None => f.wrong_type(&field, "string", value),
        }
    }
    out
}

fn attachments(f: &mut Fields, v: Option<&Value>) -> Vec<Attachment> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        f.wrong_type("attachments", "array", v);
        return Vec::new();
    };
    if items.len() > MAX_ATTACHMENTS {
        f.error(
            "attachments",
            FieldCode::TooBig,
            format!("At most {MAX_ATTACHMENTS} attachments"),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut total = 0usize;
    for (i, item) in items.iter().enumerate() {
        let field = format!("attachments[{i}]");
        let Some(o) = item.as_object() else {
            f.wrong_type(&field, "object", item);
            continue;
        };
        let text = |k: &str| {
            o.get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let (Some(filename), Some(content)) = (text("filename"), text("content")) else {
            for k in ["filename", "content"] {
                if text(k).is_none() {
                    f.error(&format!("{field}.{k}"), FieldCode::InvalidType, "Required");
                }
            }
            continue;
        };
        if let Some(other) = o
            .get("contentType")
            .filter(|v| !v.is_null() && !v.is_string())
        {
            f.wrong_type(&format!("{field}.contentType"), "string", other);
            continue;
        }
        let content_type = text("contentType").unwrap_or("application/octet-stream");
        match base64::engine::general_purpose::STANDARD.decode(content) {
            Ok(data) => {
                total += data.len();
                out.push(Attachment {
                    filename: filename.chars().take(255).collect(),
                    content_type: content_type.to_owned(),
                    data,
                });
            }
            Err(_) => f.error(
                &format!("{field}.content"),
                FieldCode::InvalidString,
                "Invalid base64",
            ),
        }
    }
    if total > MAX_ATTACHMENT_BYTES {
        f.error(
            "attachments",
            FieldCode::TooBig,
            "Attachments may be at most 10 MB in total",
        );
    }
    out
}

fn answer(receipt: Receipt) -> HttpResponse {
    HttpResponse::Ok().json(SendResponse {
        success: true,
        data: SendAnswer {
            emails: receipt
                .emails
                .iter()
                .map(|q| SentEmail {
                    contact: SentContact {
                        id: q.contact_id.to_string(),
                        email: q.email.to_string(),
                    },
                    email: q.email_id.map(|id| id.to_string()),
                    suppressed: q.suppressed().is_some(),
                    reason: q.suppressed().map(str::to_owned),
                    skipped: match q.suppressed() {
                        Some(_) => Some("suppressed".to_owned()),
                        None => q.skipped.clone(),
                    },
                })
                .collect(),
            timestamp: mailroom_actors::model::Timestamp::from(receipt.at).to_iso(),
        },
    })
}

#[utoipa::path(get, path = "/emails/{id}", tag = "Public",
    responses((status = 200, body = EmailResponse), (status = 404)), security(("bearer" = [])))]
pub async fn get_email(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: EmailId = path_id(&id, Resource::Email)?;
    let EmailRecord {
        email: e,
        status,
        content_removed,
        engagement: hits,
    } = state.engine.emails().get(p.id, id)?;
    let iso = |ms: i64| mailroom_actors::model::Timestamp::from(ms).to_iso();
    let hit = |f: fn(&Engagement) -> Option<i64>| hits.as_ref().and_then(f).map(iso);
    let count = |f: fn(&Engagement) -> u32| hits.as_ref().map_or(0, f);
    Ok(HttpResponse::Ok().json(EmailResponse {
        success: true,
        data: EmailView {
            id: e.id.to_string(),
            to: e.to.email.to_string(),
            from: e.from.email.to_string(),
            subject: e.subject,
            status: status.as_str(),
            contact_id: e.contact_id.to_string(),
            campaign_id: e.campaign_id.map(|c| c.to_string()),
            workflow_execution_id: e.workflow_execution_id.map(|x| x.to_string()),
            attempts: e.attempts,
            last_error: e.last_error,
            created_at: iso(e.created_at),
            sent_at: e.sent_at.map(iso),
            opened_at: hit(|h| h.opened_at),
            clicked_at: hit(|h| h.clicked_at),
            opens: count(|h| h.opens),
            clicks: count(|h| h.clicks),
            content_removed,
        },
    }))
}
