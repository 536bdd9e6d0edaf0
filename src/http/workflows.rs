//! The workflow endpoints (API.md section 10): bare records and bare list objects.
//! Steps are parsed and their graph checked by `mailroom_actors::workflow::steps`;
//! each write is one call to `mailroom_actors::workflow::actions`.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::workflows::{
    parse_steps as steps_of, step_json, ExecStatus, Execution, NewWorkflow, Step, StepsDocument,
    Workflow, WorkflowPatch,
};
use mailroom_actors::model::{ExecutionId, WorkflowId};
use mailroom_actors::{Error, Resource};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::SecretKey;
use super::body::Body;
use super::error::ApiError;
use super::validate::{path_id, Query};
use super::wire::{Description, Name, Nullable, Text};
use super::AppState;

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
            steps: w.steps.iter().map(step_json).collect(),
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

/// Request body of POST /workflows.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateWorkflowRequest {
    name: Name,
    description: Option<Description>,
    /// Default false.
    enabled: Option<bool>,
    /// The event that starts an execution (any event, system events included).
    trigger_event: TriggerEvent,
    /// Whether a contact may run it again while an execution of theirs is open; default false.
    allow_reentry: Option<bool>,
    steps: StepsDocument,
}

/// Request body of PATCH /workflows/{id}: the fields to change; null clears `description`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWorkflowRequest {
    name: Option<Name>,
    #[serde(default)]
    description: NullableDescription,
    enabled: Option<bool>,
    trigger_event: Option<TriggerEvent>,
    allow_reentry: Option<bool>,
    steps: Option<StepsDocument>,
}

type NullableDescription = Nullable<Description>;
/// Any event's name, a system event's too.
type TriggerEvent = Text<200>;

fn parse_steps(doc: &StepsDocument) -> Result<Vec<Step>, ApiError> {
    steps_of(&doc.0).map_err(|e| Error::Validation(e).into())
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
    let page = state.engine.workflows().list(p.id, page).await?;
    let has_more = page.has_more();
    Ok(HttpResponse::Ok().json(WorkflowList {
        workflows: page.items.iter().map(WorkflowView::from).collect(),
        cursor: page.next_cursor,
        has_more,
        total: page.total,
    }))
}

#[utoipa::path(post, path = "/workflows", tag = "Workflows", request_body = CreateWorkflowRequest,
    responses((status = 201, body = WorkflowView), (status = 404), (status = 409), (status = 422)),
    security(("bearer" = [])))]
pub async fn create(
    SecretKey(p): SecretKey,
    Body(req): Body<CreateWorkflowRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let steps = parse_steps(&req.steps)?;
    let w = NewWorkflow {
        name: req.name.into_string(),
        description: req.description.map(Text::into_string),
        enabled: req.enabled.unwrap_or(false),
        trigger_event: req.trigger_event.into_string(),
        allow_reentry: req.allow_reentry.unwrap_or(false),
        steps,
    };
    let w = state.engine.workflows().create(p.id, w).await?;
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
    let w = state.engine.workflows().get(p.id, id)?;
    Ok(HttpResponse::Ok().json(WorkflowView::from(&w)))
}

#[utoipa::path(patch, path = "/workflows/{id}", tag = "Workflows", request_body = UpdateWorkflowRequest,
    params(("id" = String, Path, description = "Workflow id")),
    responses((status = 200, body = WorkflowView), (status = 404), (status = 422)), security(("bearer" = [])))]
pub async fn update(
    SecretKey(p): SecretKey,
    id: web::Path<String>,
    Body(req): Body<UpdateWorkflowRequest>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = workflow_id(&id)?;
    let w = state
        .engine
        .workflows()
        .update(p.id, id, req.into_patch()?)
        .await?;
    Ok(HttpResponse::Ok().json(WorkflowView::from(&w)))
}

impl UpdateWorkflowRequest {
    /// The change to make, its steps parsed and their graph checked.
    fn into_patch(self) -> Result<WorkflowPatch, ApiError> {
        let req = self;
        let steps = req.steps.as_ref().map(parse_steps).transpose()?;
        Ok(WorkflowPatch {
            name: req.name.map(Text::into_string),
            description: req.description.change().map(|d| d.map(Text::into_string)),
            enabled: req.enabled,
            trigger_event: req.trigger_event.map(Text::into_string),
            allow_reentry: req.allow_reentry,
            steps,
        })
    }
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
    state.engine.workflows().delete(p.id, id).await?;
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
    let page = state
        .engine
        .workflows()
        .executions(p.id, id, status, page)
        .await?;
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
    let e = state.engine.workflows().execution(p.id, id, x)?;
    Ok(HttpResponse::Ok().json(ExecutionView::from(&e)))
}
