//! CSV import from the dashboard. With script, the file picked is sent as it is
//! (text/csv, the CSRF token in a header) and the progress page polls; without it, the
//! CSV pasted into the form is posted and the progress page is reloaded by hand. Both
//! start the same background import as POST /contacts/import.

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::contacts::{Import, ImportStatus};
use mailroom_actors::model::ImportId;
use maud::html;
use serde::Serialize;

use super::auth::{parse_form, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use super::session::csrf_matches;
use crate::api::body::read_within;
use crate::state::AppState;

pub const CSRF_HEADER: &str = "x-csrf-token";

pub async fn form(signed: Signed) -> HttpResponse {
    let body = html! {
        p { "The first row names the columns: " code { "email" } " (required), " code { "subscribed" } ", "
            code { "data" } " (a JSON object), and data columns typed by a suffix such as "
            code { "age:number" } " or " code { "vip:boolean" } "." }
        form #import-file method="post" action="/app/contacts/import" data-upload="/app/contacts/import" hidden {
            (csrf(&signed))
            label for="file" { "CSV file" }
            input #file type="file" name="file" accept=".csv,text/csv" required;
            button type="submit" { "Import the file" }
        }
        form #import-text method="post" action="/app/contacts/import" {
            (csrf(&signed))
            label for="csv" { "Or paste the CSV" }
            textarea #csv name="csv" spellcheck="false" placeholder="email,name\nada@example.com,Ada" {}
            button type="submit" { "Import the pasted CSV" }
        }
    };
    layout::page(&signed, "/app/contacts", "Import contacts", body)
}

#[derive(serde::Deserialize)]
struct PastedForm {
    #[serde(default)]
    csv: String,
}

#[derive(Serialize)]
struct Started {
    id: String,
    location: String,
}

pub async fn start(
    signed: Signed,
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let is_csv = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("text/csv"));
    let mut payload = payload.into_inner();
    let (csv, uploaded) = if is_csv {
        let given = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !csrf_matches(&signed.csrf, given) {
            return Err(PageError::Csrf);
        }
        let body = read_within(&req, &mut payload, state.limits.max_import_bytes).await?;
        (body.to_vec(), true)
    } else {
        let body = read_within(&req, &mut payload, state.limits.max_body_bytes).await?;
        let (token, form): (String, PastedForm) = parse_form(&body)?;
        if !csrf_matches(&signed.csrf, &token) {
            return Err(PageError::Csrf);
        }
        (form.csv.into_bytes(), false)
    };
    let import = state
        .engine
        .contacts()
        .import(signed.project, csv, state.limits.max_running_imports)
        .await?;
    let location = format!("/app/contacts/imports/{}", import.id);
    Ok(if uploaded {
        HttpResponse::Accepted().json(Started {
            id: import.id.to_string(),
            location,
        })
    } else {
        super::see_other(&location)
    })
}

fn load(state: &AppState, signed: &Signed, id: &str) -> Result<Import, PageError> {
    let id: ImportId = id.parse().map_err(|_| PageError::NotFound)?;
    Ok(state.engine.contacts().get_import(signed.project, id)?)
}

fn done(i: &Import) -> bool {
    matches!(i.status, ImportStatus::Completed | ImportStatus::Failed)
}

pub async fn show(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let i = load(&state, &signed, &id)?;
    let rejected = i.rejected.len() as u64 + i.rejected_unlisted;
    let body = html! {
        section #import data-poll={ "/app/contacts/imports/" (i.id) "/progress" } data-poll-ms="500"
            data-state=(if done(&i) { "done" } else { "polling" }) aria-live="polite" {
            p { "Status: " strong data-field="status" { (i.status.as_str()) } }
            progress max=(i.rows.max(1)) value=(i.processed) data-field="processed" aria-label="Rows processed" {}
            dl.stats {
                div { dt { "Rows" } dd data-field="rows" { (i.rows) } }
                div { dt { "Processed" } dd #processed data-field="processed" { (i.processed) } }
                div { dt { "Created" } dd #created data-field="created" { (i.created) } }
                div { dt { "Updated" } dd data-field="updated" { (i.updated) } }
                div { dt { "Rejected" } dd data-field="rejected" { (rejected) } }
            }
            @if let Some(e) = &i.error { p.error { (e) } }
        }
        @if !done(&i) { p { a href={ "/app/contacts/imports/" (i.id) } { "Reload" } " to see the progress without script." } }
        @if !i.rejected.is_empty() {
            table {
                caption { "Rejected rows" }
                thead { tr { th scope="col" { "Line" } th scope="col" { "Email" } th scope="col" { "Reason" } } }
                tbody {
                    @for r in &i.rejected {
                        tr { td { (r.line) } td { (r.email.as_deref().unwrap_or("")) } td { (r.reason) } }
                    }
                }
            }
        }
        p { a href="/app/contacts" { "Back to the contacts" } }
    };
    Ok(layout::page(&signed, "/app/contacts", "Import", body))
}

pub async fn progress(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let i = load(&state, &signed, &id)?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "status": i.status.as_str(),
        "rows": i.rows,
        "processed": i.processed,
        "created": i.created,
        "updated": i.updated,
        "rejected": i.rejected.len() as u64 + i.rejected_unlisted,
        "done": done(&i),
    })))
}
