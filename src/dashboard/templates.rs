//! Templates: the list, and an editor whose preview is rendered by the real sandbox
//! (the render pool, with its limits) with a chosen contact's variables.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::emails::SendRequest;
use mailroom_actors::engine::templates::Template;
use mailroom_actors::model::{EmailAddress, TemplateId};
use mailroom_actors::{Error, FieldCode};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::body;
use crate::api::error::ApiError;
use crate::api::templates::{CreateTemplateRequest, UpdateTemplateRequest};
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub struct TemplateForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    from: String,
    /// The contact whose variables the preview uses.
    #[serde(default)]
    contact: String,
    /// The template being edited, for the preview without script to come back to.
    #[serde(default)]
    id: String,
}

impl TemplateForm {
    fn of(t: &Template) -> Self {
        TemplateForm {
            name: t.name.clone(),
            subject: t.subject.clone(),
            body: t.body.clone(),
            kind: t.kind.as_str().to_owned(),
            from: t.from.as_ref().map(|e| e.to_string()).unwrap_or_default(),
            contact: String::new(),
            id: t.id.to_string(),
        }
    }

    /// The API's request body for these fields.
    fn request(&self) -> serde_json::Value {
        let mut r = json!({
            "name": self.name,
            "subject": self.subject,
            "body": self.body,
            "type": if self.kind == "MARKETING" { "MARKETING" } else { "TRANSACTIONAL" },
        });
        if !self.from.trim().is_empty() {
            r["from"] = json!(self.from.trim());
        }
        r
    }
}

fn editor(signed: &Signed, action: &str, f: &TemplateForm) -> Markup {
    html! {
        form #template-form method="post" action=(action) data-live="/app/templates/preview" data-live-target="preview" {
            (csrf(signed))
            @if !f.id.is_empty() { input type="hidden" name="id" value=(f.id); }
            label for="name" { "Name" }
            input #name type="text" name="name" value=(f.name) required maxlength="200";
            label for="kind" { "Type" }
            select #kind name="kind" {
                option value="TRANSACTIONAL" selected[f.kind != "MARKETING"] { "Transactional" }
                option value="MARKETING" selected[f.kind == "MARKETING"] { "Marketing" }
            }
            label for="from" { "From (optional; a verified domain's address)" }
            input #from type="email" name="from" value=(f.from);
            label for="subject" { "Subject" }
            input #subject type="text" name="subject" value=(f.subject) required;
            label for="body" { "Body (HTML with " code { "{{variable}}" } ", " code { "{{ data.x }}" } ", " code { "{{x ?? \"fallback\"}}" } ")" }
            textarea #body name="body" spellcheck="false" required { (f.body) }
            label for="contact" { "Preview as the contact with this email (optional)" }
            input #contact type="email" name="contact" value=(f.contact);
            button type="submit" formaction="/app/templates/preview" class="secondary" { "Preview" }
            " "
            button type="submit" { "Save" }
        }
        section #preview aria-live="polite" aria-labelledby="preview-title" {
            h2 #preview-title { "Preview" }
            p.error data-field="error" {}
            p { "Subject: " strong #preview-subject data-field="subject" {} }
            iframe.preview title="Rendered body" sandbox="" data-field="html" {}
            details open { summary { "HTML" } pre #preview-html data-field="html" {} }
        }
    }
}

pub async fn list(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let all = state.engine.templates().all(signed.project).await?;
    let body = html! {
        @if all.is_empty() { p { "No templates yet." } } @else {
            table {
                caption.visually-hidden { "Templates" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Subject" } th scope="col" { "Updated" } } }
                tbody {
                    @for t in &all {
                        tr {
                            td { a href={ "/app/templates/" (t.id) } { (t.name) } }
                            td { (t.kind.as_str()) }
                            td { (t.subject) }
                            td { (t.updated_at.to_iso()) }
                        }
                    }
                }
            }
        }
        h2 { "New template" }
        (editor(&signed, "/app/templates", &TemplateForm::default()))
    };
    Ok(layout::page(&signed, "/app/templates", "Templates", body))
}

fn template_id(raw: &str) -> Result<TemplateId, PageError> {
    raw.parse().map_err(|_| PageError::NotFound)
}

pub async fn show(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = template_id(&id)?;
    let t = state.engine.templates().get(signed.project, id)?;
    let body = html! {
        (editor(&signed, &format!("/app/templates/{id}"), &TemplateForm::of(&t)))
        h2 { "Test send" }
        p.muted { "Sends the saved template as POST /v1/send does (the address becomes a contact if it is not one)." }
        form #test-form method="post" action={ "/app/templates/" (id) "/test" } {
            (csrf(&signed))
            label for="test-email" { "Send one email to" }
            input #test-email type="email" name="email" required;
            @if t.from.is_none() {
                label for="test-from" { "From (the template has none; an address of a verified domain)" }
                input #test-from type="email" name="from" required;
            }
            button type="submit" class="secondary" { "Send a test" }
        }
    };
    Ok(layout::page(&signed, "/app/templates", &t.name, body))
}

#[derive(Deserialize)]
pub struct TestForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    from: String,
}

/// One email of the saved template, through the engine's send (its rules, its queue).
pub async fn test(
    Posted(signed, form): Posted<TestForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = template_id(&id)?;
    let address = |field: &str, raw: &str| {
        EmailAddress::parse(raw.trim())
            .map_err(|_| Error::field(field, FieldCode::InvalidString, "Invalid email"))
    };
    let to = address("email", &form.email)?;
    let from = match form.from.trim() {
        "" => None,
        raw => Some((address("from", raw)?, None)),
    };
    let shown = to.to_string();
    let request = SendRequest {
        recipients: vec![(to, None)],
        template: Some(id),
        subject: None,
        body: None,
        text: None,
        from,
        from_name: None,
        reply_to: None,
        subscribed: None,
        data: serde_json::Map::new(),
        headers: Vec::new(),
        attachments: Vec::new(),
        idempotency: None,
        execution: None,
    };
    state.engine.emails().send(signed.project, request).await?;
    let body = html! {
        p.ok role="status" #test-sent { "A test was queued to " (shown) "." }
        p { a href={ "/app/templates/" (id) } { "Back to the template" } }
    };
    Ok(layout::page(&signed, "/app/templates", "Test sent", body))
}

pub async fn create(
    Posted(signed, form): Posted<TemplateForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let req: CreateTemplateRequest = body::parse(form.request().to_string().as_bytes())?;
    let t = state
        .engine
        .templates()
        .create(signed.project, req.into())
        .await?;
    Ok(super::see_other(&format!("/app/templates/{}", t.id)))
}

pub async fn update(
    Posted(signed, form): Posted<TemplateForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = template_id(&id)?;
    let mut request = form.request();
    if form.from.trim().is_empty() {
        request.as_object_mut().map(|o| o.remove("from"));
    }
    let req: UpdateTemplateRequest = body::parse(request.to_string().as_bytes())?;
    state
        .engine
        .templates()
        .update(signed.project, id, req.into())
        .await?;
    Ok(super::see_other(&format!("/app/templates/{id}")))
}

/// Subject and body rendered as an email to the chosen contact (or to a stand-in with
/// no data) would be.
async fn render(
    state: &AppState,
    signed: &Signed,
    f: &TemplateForm,
) -> Result<(String, String), ApiError> {
    let contact = Some(f.contact.trim()).filter(|c| !c.is_empty());
    Ok(state
        .engine
        .templates()
        .preview(signed.project, f.subject.clone(), f.body.clone(), contact)
        .await?)
}

/// The live preview (`{subject, html, error}`) for script, the page again without.
pub async fn preview(
    req: actix_web::HttpRequest,
    Posted(signed, form): Posted<TemplateForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let rendered = render(&state, &signed, &form).await;
    let action = match form.id.parse::<TemplateId>() {
        Ok(id) => format!("/app/templates/{id}"),
        Err(_) => "/app/templates".to_owned(),
    };
    let wants_json = req
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if wants_json {
        return Ok(match rendered {
            Ok((subject, html)) => {
                HttpResponse::Ok().json(json!({"subject": subject, "html": html, "error": ""}))
            }
            Err(e) => HttpResponse::UnprocessableEntity()
                .json(json!({"subject": "", "html": "", "error": super::segments::error_text(&e)})),
        });
    }
    let body = html! {
        @match &rendered {
            Ok((subject, html)) => {
                p { "Subject: " strong #preview-subject { (subject) } }
                pre #preview-html { (html) }
            }
            Err(e) => p.error role="alert" { (super::segments::error_text(e)) },
        }
        (editor(&signed, &action, &form))
    };
    Ok(layout::page(&signed, "/app/templates", "Preview", body))
}
