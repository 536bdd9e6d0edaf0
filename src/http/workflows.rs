//! The workflow endpoints (API.md section 10): bare records and bare list objects.
//! Steps are parsed and their graph checked by `mailroom_actors::workflow::steps`;
//! the writes run in the project's actor (`project::workflows`).

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::model::{ExecStatus, Execution, ExecutionId, Workflow, WorkflowId};
use mailroom_actors::project::apply::Apply;
use mailroom_actors::project::workflows::{self as stored, WorkflowPatch};
use mailroom_actors::workflow::steps;
use mailroom_actors::{Error, FieldCode, Resource};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::JsonBody;
use super::error::ApiError;
use super::validate::{path_id, Fields, Query};
use super::{blocking, AppState};

const MAX_NAME: usize = 200;
const MAX_DESCRIPTION: usize = 1000;
const MAX_EVENT_NAME: usize = 200;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowView {
    id: String,
    name: String,
    description: Option<String>,
    enabled: bool,
    trigger_event: String,
    allow_reentry: bool,
    /// `{id, type, config, next}`; CONDITION has `yes`/`no`, WAIT_FOR_EVENT `timeoutNext`.
    #[schema(value_type = Vec<Object>)]
    steps: Vec<Value>,
    created_at: String,
    updated_at: String,
}

impl From<&Workflow> for WorkflowView {
    fn from(w: &Workflow) -> Self {
        let iso = |ms: i64| mailroom_actors::model::Timestamp::from(ms).to_iso();
        WorkflowView {
            id: w.id.to_string(),
            name: w.name.clone(),
            description: w.description.clone(),
            enabled: w.enabled,
            trigger_event: w.trigger_event.clone(),
            allow_reentry: w.allow_reentry,
            steps: w.steps.iter().map(steps::to_json).collect(),
            created_at: iso(w.created_at),
            updated_at: iso(w.updated_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowList {
    workflows: Vec<WorkflowView>,
    cursor: Option<String>,
    has_more: bool,
    total: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryView {
    step_id: String,
    #[serde(rename = "type")]
    kind: String,
    /// COMPLETED, FAILED or TIMED_OUT.
    status: String,
    at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// A WEBHOOK's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    status_code: Option<u16>,
    /// A CONDITION's branch: yes or no.
    #[serde(skip_serializing_if = "Option::is_none")]
    branch: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionView {
    id: String,
    workflow_id: String,
    contact_id: String,
    /// RUNNING, WAITING, COMPLETED, EXITED, FAILED or CANCELLED.
    status: &'static str,
    current_step_id: Option<String>,
    started_at: String,
    completed_at: Option<String>,
    history: Vec<HistoryView>,
}

impl From<&Execution> for ExecutionView {
    fn from(e: &Execution) -> Self {
        let iso = |ms: i64| mailroom_actors::model::Timestamp::from(ms).to_iso();
        ExecutionView {
            id: e.id.to_string(),
            workflow_id: e.workflow_id.to_string(),
            contact_id: e.contact_id.to_string(),
            status: e.status.as_str(),
            current_step_id: e.current.clone(),
            started_at: iso(e.started_at),
            completed_at: e.completed_at.map(iso),
            history: e
                .history
                .iter()
                .map(|h| HistoryView {
                    step_id: h.step_id.clone(),
                    kind: h.kind.clone(),
                    status: h.status.clone(),
                    at: iso(h.at),
                    error: h.error.clone(),
                    status_code: h.status_code,
                    branch: h.branch.clone(),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionList {
    executions: Vec<ExecutionView>,
    cursor: Option<String>,
    has_more: bool,
    total: u64,
}

/// Request body of POST /workflows, and of PATCH /workflows/{id} (all optional there).
#[allow(dead_code)]
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub struct WorkflowRequest {
    name: String,
    description: Option<String>,
    /// Default false.
    enabled: Option<bool>,
    trigger_event: String,
    /// Default false.
    allow_reentry: Option<bool>,
    /// 1 to 100 steps; execution starts at the first.
    #[schema(value_type = Vec<Object>)]
    steps: Vec<Value>,
}

fn steps_of(
    f: &mut Fields,
    body: &Value,
    required: bool,
) -> Option<Vec<mailroom_actors::model::Step>> {
    match body.get("steps") {
        None | Some(Value::Null) => {
            if required {
                f.error("steps", FieldCode::InvalidType, "Required");
            }
            None
        }
        Some(v) => match steps::parse(v) {
            Ok(s) => Some(s),
            Err(errors) => {
                f.extend(errors);
                None
            }
        },
    }
}

fn workflow_id(id: &str) -> Result<WorkflowId, ApiError> {
    path_id(id, Resource::Workflow)
}

#[utoipa::path(get, path = "/workflows", tag = "Workflows",
    params(("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = WorkflowList), (status = 422)), security(("bearer" = [])))]
pub async fn list(
    SecretKey(p): SecretKey,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let page = Query::parse(req.query_string())?.page()?;
    let store = state.store.clone();
    let page = blocking(move || stored::list(&*store, p.id, &page)).await?;
    let has_more = page.has_more();
    Ok(HttpResponse::Ok().json(WorkflowList {
        workflows: page.items.iter().map(WorkflowView::from).collect(),
        cursor: page.next_cursor,
        has_more,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/workflows", tag = "Workflows", request_body = WorkflowRequest,
    responses((status = 201, body = WorkflowView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::of(&body)?;
    let name = f.string("name", MAX_NAME);
    let description = f.opt_string("description", MAX_DESCRIPTION);
    let enabled = f.opt_bool("enabled");
    let trigger_event = f.string("triggerEvent", MAX_EVENT_NAME);
    let allow_reentry = f.opt_bool("allowReentry");
    let steps = steps_of(&mut f, &body, true);
    f.finish()?;
    let (Some(name), Some(trigger_event), Some(steps)) = (name, trigger_event, steps) else {
        return Err(Error::Internal("validated fields went missing".into()).into());
    };
    let now = mailroom_actors::model::Timestamp::from(state.clock.now()).millis();
    let w = Workflow {
        id: WorkflowId::new(),
        name,
        description,
        enabled: enabled.unwrap_or(false),
        trigger_event,
        allow_reentry: allow_reentry.unwrap_or(false),
        steps,
        created_at: now,
        updated_at: now,
    };
    let w = state
        .registry
        .send(p.id, Apply::durable(move |ctx, _| stored::create(ctx, w)))
        .await?;
    Ok(HttpResponse::Created().json(WorkflowView::from(&w)))
}

#[utoipa::path(get, path = "/workflows/{id}", tag = "Workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses((status = 200, body = WorkflowView), (status = 404)), security(("bearer" = [])))]
pub async fn get(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(&id)?;
    let w = stored::get(&*state.store, p.id, id)?;
    Ok(HttpResponse::Ok().json(WorkflowView::from(&w)))
}

#[utoipa::path(patch, path = "/workflows/{id}", tag = "Workflows", request_body = WorkflowRequest,
    params(("id" = String, Path, description = "Workflow id")),
    responses((status = 200, body = WorkflowView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    JsonBody(body): JsonBody,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(&id)?;
    let mut f = Fields::of(&body)?;
    let name = f.opt_string("name", MAX_NAME);
    let description = match body.get("description") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(_) => f.opt_string("description", MAX_DESCRIPTION).map(Some),
    };
    let enabled = f.opt_bool("enabled");
    let trigger_event = f.opt_string("triggerEvent", MAX_EVENT_NAME);
    let allow_reentry = f.opt_bool("allowReentry");
    let steps = steps_of(&mut f, &body, false);
    f.finish()?;
    let patch = WorkflowPatch {
        name,
        description,
        enabled,
        trigger_event,
        allow_reentry,
        steps,
    };
    let w = state
        .registry
        .send(
            p.id,
            Apply::durable(move |ctx, _| stored::update(ctx, id, patch)),
        )
        .await?;
    Ok(HttpResponse::Ok().json(WorkflowView::from(&w)))
}

#[utoipa::path(delete, path = "/workflows/{id}", tag = "Workflows",
    params(("id" = String, Path, description = "Workflow id")),
    responses((status = 204), (status = 404)), security(("bearer" = [])))]
pub async fn delete(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(&id)?;
    state
        .registry
        .send(p.id, Apply::durable(move |ctx, _| stored::delete(ctx, id)))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/workflows/{id}/executions", tag = "Workflows",
    params(("id" = String, Path, description = "Workflow id"),
        ("status" = Option<String>, Query, description = "RUNNING, WAITING, COMPLETED, EXITED, FAILED or CANCELLED"),
        ("limit" = Option<u32>, Query, description = "1 to 100, default 20"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = ExecutionList), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn executions(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(&id)?;
    let q = Query::parse(req.query_string())?;
    let page = q.page()?;
    let status = q.opt_enum(
        "status",
        "RUNNING, WAITING, COMPLETED, EXITED, FAILED or CANCELLED",
        ExecStatus::parse,
    )?;
    stored::get(&*state.store, p.id, id)?;
    let store = state.store.clone();
    let page = blocking(move || stored::executions(&*store, p.id, id, status, &page)).await?;
    let has_more = page.has_more();
    Ok(HttpResponse::Ok().json(ExecutionList {
        executions: page.items.iter().map(ExecutionView::from).collect(),
        cursor: page.next_cursor,
        has_more,
        total: page.total,
    }))
}

#[utoipa::path(get, path = "/workflows/{id}/executions/{executionId}", tag = "Workflows",
    params(("id" = String, Path, description = "Workflow id"), ("executionId" = String, Path, description = "Execution id")),
    responses((status = 200, body = ExecutionView), (status = 404)), security(("bearer" = [])))]
pub async fn execution(
    SecretKey(p): SecretKey,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (id, x) = path.into_inner();
    let id = workflow_id(&id)?;
    let x: ExecutionId = path_id(&x, Resource::Execution)?;
    stored::get(&*state.store, p.id, id)?;
    let e = stored::execution(&*state.store, p.id, id, x)?;
    Ok(HttpResponse::Ok().json(ExecutionView::from(&e)))
}
