//! The OpenAPI 3 description, generated from the handlers' annotations.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    admin, campaigns, contacts, contacts_bulk, domains, events, feedback, ops, segments, send,
    stats, suppressions, templates, track, verify, webhooks, workflows,
};

#[derive(OpenApi)]
#[openapi(
    info(title = "Mailroom API", description = "Email delivery and audience API, compatible with Plunk's"),
    paths(
        ops::health, ops::metrics, ops::openapi,
        contacts::list, contacts::upsert, contacts::get, contacts::patch, contacts::delete,
        contacts_bulk::import, contacts_bulk::get_import, contacts_bulk::export,
        templates::list, templates::create, templates::get, templates::update, templates::delete,
        send::send, send::get_email,
        domains::list, domains::create, domains::get, domains::delete, domains::verify,
        verify::verify,
        admin::create_project, admin::list_projects,
        track::track, events::list, events::names, events::get,
        segments::list, segments::create, segments::get, segments::update, segments::delete,
        segments::contacts, segments::add_members, segments::remove_members,
        campaigns::list, campaigns::create, campaigns::get, campaigns::update, campaigns::delete,
        campaigns::send, campaigns::cancel, campaigns::resume, campaigns::test, campaigns::stats,
        workflows::list, workflows::create, workflows::get, workflows::update, workflows::delete,
        workflows::executions, workflows::execution,
        webhooks::list, webhooks::create, webhooks::get, webhooks::update, webhooks::delete,
        webhooks::rotate_secret, webhooks::deliveries, webhooks::test,
        suppressions::list, suppressions::add, suppressions::remove, suppressions::import,
        feedback::postmark, feedback::sendgrid, feedback::mailgun, feedback::ses, stats::get,
    ),
    components(schemas(
        crate::api::contacts::ContactView, crate::api::contacts::ContactList, crate::api::contacts::UpsertMeta,
        crate::api::contacts_bulk::ImportView, crate::api::contacts_bulk::RejectedRow,
        crate::api::contacts::UpsertContactRequest, crate::api::contacts::PatchContactRequest, crate::api::ops::Health,
        crate::api::error::ErrorBody, crate::api::templates::TemplateView, crate::api::templates::TemplateList, crate::api::templates::CreateTemplateRequest,
        crate::api::templates::UpdateTemplateRequest,
        crate::api::send::SendRequest, crate::api::send::SendResponse, crate::api::send::EmailResponse,
        crate::api::domains::DomainView, crate::api::domains::RecordView, crate::api::domains::DomainList, crate::api::domains::CreateDomainRequest,
        crate::api::verify::VerificationView, crate::api::verify::VerifyEnvelope, crate::api::verify::VerifyRequest,
        crate::api::track::TrackRequest, crate::api::track::TrackResponse, crate::api::track::TrackData,
        crate::api::events::EventView, crate::api::events::EventList, crate::api::events::EventName, crate::api::events::EventNames,
        crate::api::segments::SegmentView, crate::api::segments::SegmentList, crate::api::segments::CreateSegmentRequest,
        crate::api::segments::UpdateSegmentRequest, crate::api::segments::MembersRequest, crate::api::segments::MembersAdded,
        crate::api::segments::MembersRemoved,
        crate::api::campaigns::CampaignView, crate::api::campaigns::CampaignList, crate::api::campaigns::StatsView, crate::api::campaigns::TestSent,
        crate::api::campaigns::CreateCampaignRequest, crate::api::campaigns::UpdateCampaignRequest,
        crate::api::campaigns::SendCampaignRequest, crate::api::campaigns::TestCampaignRequest,
        crate::api::workflows::WorkflowView, crate::api::workflows::WorkflowList, crate::api::workflows::ExecutionView,
        crate::api::workflows::ExecutionList, crate::api::workflows::HistoryView, crate::api::workflows::CreateWorkflowRequest,
        crate::api::workflows::UpdateWorkflowRequest,
        crate::api::webhooks::WebhookView, crate::api::webhooks::WebhookList, crate::api::webhooks::DeliveryView,
        crate::api::webhooks::DeliveryList, crate::api::webhooks::TestResult, crate::api::webhooks::CreateWebhookRequest,
        crate::api::webhooks::UpdateWebhookRequest,
        crate::api::suppressions::SuppressionView, crate::api::suppressions::SuppressionList,
        crate::api::suppressions::AddSuppressionRequest, crate::api::suppressions::SuppressionReason,
        crate::api::suppressions::ManualReason, crate::api::suppressions::ImportResult, crate::api::suppressions::InvalidRow, crate::api::feedback::CallbackResult, crate::api::stats::ProjectStatsView,
    )),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document `/openapi.json` serves: the generated one, completed with what every
/// operation shares, so each one lists all it can answer. Built once.
pub fn document() -> &'static serde_json::Value {
    static DOC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        complete(&mut doc);
        doc
    })
}

/// The error statuses an operation with a key can answer (API.md section 1): a body
/// that does not parse, a missing or wrong key, a public key on a secret-key route or a
/// disabled project, a record that is not there, a conflict, a body too large, a field
/// that fails, the rate limit, a full mailbox, an internal error.
const KEYED_ERRORS: [(&str, &str); 11] = [
    (
        "400",
        "The body or query string does not parse (BAD_REQUEST)",
    ),
    (
        "401",
        "No key, or an unknown key (MISSING_AUTH, INVALID_API_KEY)",
    ),
    (
        "403",
        "A public key where a secret key is needed, or a disabled project",
    ),
    ("404", "No such record in this project"),
    ("405", "Another method than the path takes"),
    (
        "409",
        "A conflict: a state that does not allow it, a limit, an Idempotency-Key reused",
    ),
    ("413", "The body is over limits.max_body_bytes"),
    (
        "422",
        "A field fails validation (VALIDATION_ERROR with errors[])",
    ),
    (
        "429",
        "The project's rate limit (RATE_LIMIT_EXCEEDED), with Retry-After",
    ),
    ("500", "An internal error (INTERNAL_SERVER_ERROR)"),
    ("503", "The project is busy; retry after Retry-After"),
];

/// Declares every `{name}` of a path as a path parameter, the error answers of each
/// operation with the error body's schema, and the bounds of `limit`.
/// Components whose schema is JSON Schema written by hand next to their parser: the
/// document carries each as written, in place of utoipa's stand-in.
fn exact() -> [(&'static str, serde_json::Value); 7] {
    use mailroom_actors::engine::segments::FilterDocument;
    use mailroom_actors::engine::workflows::StepsDocument;
    [
        ("FilterGroup", FilterDocument::json_schema()),
        ("WorkflowSteps", StepsDocument::json_schema()),
        ("Recipients", crate::api::send::Recipients::json_schema()),
        ("Sender", crate::api::send::Sender::json_schema()),
        ("Headers", crate::api::send::Headers::json_schema()),
        ("Attachments", crate::api::send::Attachments::json_schema()),
        (
            "TrackedEventName",
            crate::api::wire::EventName::json_schema(),
        ),
    ]
}

/// The query parameters that take a value of a given form, as their handlers check them.
fn query_schema(path: &str, name: &str) -> Option<serde_json::Value> {
    use serde_json::json;
    let one_of = |values: &[&str]| json!({"type": "string", "enum": values});
    let id =
        json!({"type": "string", "pattern": mailroom_actors::model::PageRequest::CURSOR_PATTERN});
    let instant = json!({"type": "string", "format": "date-time"});
    // An empty value is no filter at all.
    let or_empty =
        |schema: serde_json::Value| json!({"anyOf": [schema, {"type": "string", "maxLength": 0}]});
    Some(or_empty(match (path, name) {
        ("/domains", "status") => one_of(&["PENDING", "VERIFIED", "FAILED"]),
        ("/templates", "type") => one_of(&["TRANSACTIONAL", "MARKETING"]),
        ("/workflows/{id}/executions", "status") => one_of(&[
            "RUNNING",
            "WAITING",
            "COMPLETED",
            "EXITED",
            "FAILED",
            "CANCELLED",
        ]),
        ("/contacts", "subscribed") => json!({"type": "boolean"}),
        ("/contacts", "search") => json!({"type": "string", "maxLength": 254}),
        ("/events", "name") => json!({"type": "string", "maxLength": 200}),
        ("/events", "contactId") => id,
        ("/events", "email") => json!({"$ref": "#/components/schemas/EmailAddress"}),
        ("/events", "since" | "until") => instant,
        _ => return None,
    }))
}

fn complete(doc: &mut serde_json::Value) {
    use serde_json::{json, Value};
    for (name, schema) in exact() {
        doc["components"]["schemas"][name] = schema;
    }
    let error = json!({"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}});
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let names: Vec<String> = path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split('}').next())
            .map(str::to_owned)
            .collect();
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !["get", "post", "patch", "put", "delete"].contains(&method.as_str()) {
                continue;
            }
            let keyed = op.get("security").is_some();
            let params = op
                .as_object_mut()
                .map(|o| o.entry("parameters").or_insert_with(|| json!([])));
            if let Some(Value::Array(params)) = params {
                for name in &names {
                    let declared = params
                        .iter()
                        .any(|p| p["name"] == name.as_str() && p["in"] == "path");
                    if !declared {
                        params.push(json!({"name": name, "in": "path", "required": true,
                            "schema": {"type": "string"}}));
                    }
                }
                for p in params.iter_mut() {
                    if let Some(schema) = query_schema(path, p["name"].as_str().unwrap_or("")) {
                        if p["in"] == "query" {
                            p["schema"] = schema;
                        }
                    }
                    if p["name"] == "limit" && p["in"] == "query" {
                        p["schema"] = json!({"type": "integer", "minimum": 1, "maximum": 100});
                    }
                    // A cursor is the id of the last record of the previous page.
                    if p["name"] == "cursor" && p["in"] == "query" {
                        p["schema"] = json!({"type": "string",
                            "pattern": mailroom_actors::model::PageRequest::CURSOR_PATTERN});
                    }
                }
            }
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            // Campaign and webhook answers come inside `{success, data}` (API.md
            // sections 1 and 26).
            if path.starts_with("/campaigns") || path.starts_with("/webhooks") {
                for status in ["200", "201"] {
                    let schema = responses
                        .get_mut(status)
                        .and_then(|r| r.pointer_mut("/content/application~1json/schema"));
                    if let Some(schema) = schema {
                        let data = schema.take();
                        *schema = json!({"type": "object", "required": ["success", "data"],
                            "properties": {"success": {"type": "boolean"}, "data": data}});
                    }
                }
            }
            let errors: &[(&str, &str)] = if keyed {
                &KEYED_ERRORS
            } else {
                &KEYED_ERRORS[4..5]
            };
            for (status, text) in errors {
                let entry = responses
                    .entry(status.to_string())
                    .or_insert_with(|| json!({"description": text}));
                if let Some(o) = entry.as_object_mut() {
                    o.entry("content").or_insert_with(|| error.clone());
                }
            }
        }
    }
}
