//! Segments: the list with member counts, and a builder for the filter language (rows
//! of field, operator and value under AND or OR, or the filter as JSON) whose member
//! count follows the form as it is filled in.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::segments::FilterDocument;
use mailroom_actors::model::PageRequest;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::body;
use crate::api::error::ApiError;
use crate::api::segments::{draft_filter, views, CreateSegmentRequest, SegmentView};
use crate::state::AppState;

/// Condition rows the builder shows.
const ROWS: usize = 3;

const OPERATORS: &[&str] = &[
    "equals",
    "notEquals",
    "contains",
    "notContains",
    "greaterThan",
    "lessThan",
    "greaterThanOrEqual",
    "lessThanOrEqual",
    "exists",
    "notExists",
    "in",
    "notIn",
    "within",
    "olderThan",
    "triggered",
    "notTriggered",
    "triggeredWithin",
    "triggeredOlderThan",
];

#[derive(Deserialize, Default)]
pub struct FilterForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    match_: String,
    #[serde(default)]
    json: String,
    #[serde(default)]
    field0: String,
    #[serde(default)]
    op0: String,
    #[serde(default)]
    value0: String,
    #[serde(default)]
    field1: String,
    #[serde(default)]
    op1: String,
    #[serde(default)]
    value1: String,
    #[serde(default)]
    field2: String,
    #[serde(default)]
    op2: String,
    #[serde(default)]
    value2: String,
}

/// A value as typed: JSON when it reads as JSON (a number, true, a list), else text;
/// a comma-separated list for `in` and `notIn`.
fn value_of(op: &str, raw: &str) -> Value {
    let raw = raw.trim();
    if let Ok(v) = serde_json::from_str::<Value>(raw) {
        if !v.is_string() {
            return v;
        }
    }
    if op == "in" || op == "notIn" {
        return Value::Array(raw.split(',').map(|s| json!(s.trim())).collect());
    }
    json!(raw)
}

/// The filter document the form states (the JSON box wins when filled in).
fn document(form: &FilterForm) -> Result<FilterDocument, ApiError> {
    let doc = if !form.json.trim().is_empty() {
        serde_json::from_str::<Value>(&form.json).map_err(|_| {
            mailroom_actors::Error::field(
                "filters",
                mailroom_actors::FieldCode::InvalidType,
                "The filter is not JSON",
            )
        })?
    } else {
        let rows = [
            (&form.field0, &form.op0, &form.value0),
            (&form.field1, &form.op1, &form.value1),
            (&form.field2, &form.op2, &form.value2),
        ];
        let conditions: Vec<Value> = rows
            .iter()
            .filter(|(f, _, _)| !f.trim().is_empty())
            .map(|(field, op, value)| {
                let mut c = json!({"field": field.trim(), "operator": op});
                let takes_value = !matches!(
                    op.as_str(),
                    "exists" | "notExists" | "triggered" | "notTriggered"
                );
                if takes_value {
                    c["value"] = value_of(op, value);
                }
                if matches!(
                    op.as_str(),
                    "within" | "olderThan" | "triggeredWithin" | "triggeredOlderThan"
                ) {
                    c["unit"] = json!("days");
                }
                c
            })
            .collect();
        let operator = if form.match_ == "OR" { "OR" } else { "AND" };
        json!({"operator": operator, "conditions": conditions})
    };
    body::parse::<FilterDocument>(doc.to_string().as_bytes())
}

fn builder(signed: &Signed, form: &FilterForm) -> Markup {
    let rows = [
        (&form.field0, &form.op0, &form.value0),
        (&form.field1, &form.op1, &form.value1),
        (&form.field2, &form.op2, &form.value2),
    ];
    html! {
        form #segment-form method="post" action="/app/segments" data-live="/app/segments/count" data-live-target="member-count" {
            (csrf(signed))
            label for="name" { "Name" }
            input #name type="text" name="name" value=(form.name) required maxlength="100";
            fieldset {
                legend { "Contacts that match" }
                label for="match" { "Match" }
                select #match name="match_" {
                    option value="AND" selected[form.match_ != "OR"] { "all of the conditions (AND)" }
                    option value="OR" selected[form.match_ == "OR"] { "any of the conditions (OR)" }
                }
                @for (i, (field, op, value)) in rows.iter().enumerate().take(ROWS) {
                    div.row {
                        div {
                            label for={ "field" (i) } { "Field " (i + 1) }
                            input id={ "field" (i) } type="text" name={ "field" (i) } value=(field)
                                placeholder="email, subscribed, data.plan, event.signup" list="fields";
                        }
                        div {
                            label for={ "op" (i) } { "Operator " (i + 1) }
                            select id={ "op" (i) } name={ "op" (i) } {
                                @for o in OPERATORS { option value=(o) selected[*op == o] { (o) } }
                            }
                        }
                        div {
                            label for={ "value" (i) } { "Value " (i + 1) }
                            input id={ "value" (i) } type="text" name={ "value" (i) } value=(value)
                                placeholder="text, 42, true, a,b (for in), days (for within)";
                        }
                    }
                }
                datalist #fields {
                    option value="email" {} option value="subscribed" {} option value="createdAt" {}
                    option value="updatedAt" {} option value="data." {} option value="event." {}
                }
            }
            details {
                summary { "Or write the filter as JSON" }
                label for="json" { "Filter (JSON; used instead of the rows when filled in)" }
                textarea #json name="json" spellcheck="false" placeholder=r#"{"operator":"AND","conditions":[{"field":"data.plan","operator":"equals","value":"pro"}]}"# { (form.json) }
            }
            p #member-count aria-live="polite" {
                "Members now: " strong data-field="count" { "–" } " " span.error data-field="error" {}
            }
            button type="submit" name="action" value="count" formaction="/app/segments/preview" class="secondary" { "Count members" }
            " "
            button type="submit" { "Save the segment" }
        }
    }
}

pub async fn list(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let p = signed.project;
    let segments = state.engine.segments();
    let page = segments.list(p, PageRequest::first(100)).await?;
    let views: Vec<SegmentView> = views(segments.counted(p, page.items).await?);
    let body = html! {
        @if views.is_empty() { p { "No segments yet." } } @else {
            table {
                caption.visually-hidden { "Segments" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Members" } } }
                tbody {
                    @for v in &views {
                        @let j = serde_json::to_value(v).unwrap_or_default();
                        tr {
                            td { (j["name"].as_str().unwrap_or_default()) }
                            td { (j["type"].as_str().unwrap_or_default()) }
                            td.members { (j["memberCount"]) }
                        }
                    }
                }
            }
        }
        h2 { "New segment" }
        (builder(&signed, &FilterForm::default()))
    };
    Ok(layout::page(&signed, "/app/segments", "Segments", body))
}

/// How many contacts the form's filter matches now.
async fn count_filter(
    state: &AppState,
    p: mailroom_actors::model::ProjectId,
    doc: &FilterDocument,
) -> Result<u64, ApiError> {
    let filter = draft_filter(doc, state.limits.max_data_bytes)?;
    Ok(state.engine.segments().count_filter(p, filter).await?)
}

/// The live count: `{count}` or `{error}`.
pub async fn count(
    Posted(signed, form): Posted<FilterForm>,
    state: web::Data<AppState>,
) -> HttpResponse {
    let counted = match document(&form) {
        Ok(doc) => count_filter(&state, signed.project, &doc).await,
        Err(e) => Err(e),
    };
    match counted {
        Ok(n) => HttpResponse::Ok().json(json!({"count": n, "error": ""})),
        Err(e) => {
            HttpResponse::UnprocessableEntity().json(json!({"count": "–", "error": error_text(&e)}))
        }
    }
}

pub fn error_text(e: &ApiError) -> String {
    match e {
        ApiError::Engine(mailroom_actors::Error::Validation(fields)) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

/// Without script: the count, shown on the form again.
pub async fn preview(
    Posted(signed, form): Posted<FilterForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let counted = match document(&form) {
        Ok(doc) => count_filter(&state, signed.project, &doc).await,
        Err(e) => Err(e),
    };
    let body = html! {
        @match &counted {
            Ok(n) => p { "This filter matches " strong #preview-count { (n) } " contacts now." },
            Err(e) => p.error role="alert" { (error_text(e)) },
        }
        (builder(&signed, &form))
    };
    Ok(layout::page(&signed, "/app/segments", "New segment", body))
}

pub async fn create(
    Posted(signed, form): Posted<FilterForm>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let doc = document(&form)?;
    let request = json!({"name": form.name, "type": "DYNAMIC", "filters": doc.0});
    let req: CreateSegmentRequest = body::parse(request.to_string().as_bytes())?;
    let new = req.into_new(state.limits.max_data_bytes)?;
    state.engine.segments().create(signed.project, new).await?;
    Ok(super::see_other("/app/segments"))
}
