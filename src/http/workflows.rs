//! The workflow endpoints (API.md section 10): bare records and bare list objects.
//! Steps are parsed and their graph checked by `mailroom_actors::workflow::steps`;
//! each write is one call to `mailroom_actors::workflow::actions`.

use actix_web::{web, HttpRequest, HttpResponse};
use mailroom_actors::engine::workflows::{ExecStatus, NewWorkflow};
use mailroom_actors::model::ExecutionId;
use mailroom_actors::Resource;

use super::auth::SecretKey;
use crate::api::body::Body;
use crate::api::error::ApiError;
use crate::api::validate::{path_id, Query};
use crate::api::wire::Text;
use crate::state::AppState;

use crate::api::workflows::{
    parse_steps, workflow_id, CreateWorkflowRequest, ExecutionList, ExecutionView,
    UpdateWorkflowRequest, WorkflowList, WorkflowView,
};
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
    let page = page.map(|w| WorkflowView::from(&w));
    Ok(HttpResponse::Ok().json(WorkflowList::from(page)))
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
    let page = page.map(|e| ExecutionView::from(&e));
    Ok(HttpResponse::Ok().json(ExecutionList::from(page)))
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
