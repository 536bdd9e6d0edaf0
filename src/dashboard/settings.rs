//! Settings: the project, and rotating its keys. The new keys are shown once, on the
//! answer to the rotation, and never again; the session that rotated stays signed in.

use actix_web::{web, HttpResponse};
use mailroom_actors::model::Timestamp;
use maud::html;
use serde::Deserialize;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use super::session::Principal;
use crate::api::admin::keys_json;
use crate::state::AppState;

pub async fn page(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let project = state.engine.projects().get(signed.project)?;
    let body = html! {
        dl {
            dt { "Name" } dd { (project.name) }
            dt { "Id" } dd { code { (project.id) } }
            dt { "Created" } dd { (Timestamp::from(project.created_at).to_iso()) }
        }
        h2 { "Rotate the keys" }
        p { "A new secret key and a new public key replace the current ones at once: every server and page that uses the old keys stops working, and other dashboard sessions signed in with the old secret key end. The new keys are shown once." }
        form #rotate-form method="post" action="/app/settings/rotate" {
            (csrf(&signed))
            label {
                input #confirm type="checkbox" name="confirm" value="yes" required;
                " I understand that the current keys stop working"
            }
            button.danger type="submit" { "Rotate the keys" }
        }
    };
    Ok(layout::page(&signed, "/app/settings", "Settings", body))
}

#[derive(Deserialize)]
pub struct RotateForm {
    confirm: Option<String>,
}

pub async fn rotate(
    Posted(signed, form): Posted<RotateForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    if form.confirm.as_deref() != Some("yes") {
        return Err(mailroom_actors::Error::field(
            "confirm",
            mailroom_actors::FieldCode::InvalidType,
            "Tick the box to confirm",
        )
        .into());
    }
    let issued = state.engine.admin().rotate_keys(signed.project).await?;
    if !signed.admin {
        state
            .dashboard
            .sessions
            .set_principal(
                &signed.session_id,
                Principal::Project {
                    id: issued.project.id,
                    key_hash: issued.project.secret_key_hash,
                },
            )
            .await?;
    }
    let keys = keys_json(&issued);
    let body = html! {
        p.ok role="status" { "The keys were rotated. Copy them now: they are not shown again." }
        dl {
            dt { "Secret key" } dd { code #secret-key { (keys["secretKey"].as_str().unwrap_or_default()) } }
            dt { "Public key" } dd { code #public-key { (keys["publicKey"].as_str().unwrap_or_default()) } }
        }
        p { a href="/app/settings" { "Back to the settings" } }
    };
    let mut res = layout::page(&signed, "/app/settings", "New keys", body);
    res.headers_mut().insert(
        actix_web::http::header::CACHE_CONTROL,
        actix_web::http::header::HeaderValue::from_static("no-store"),
    );
    Ok(res)
}
