//! The typed requests and views of the workflows endpoints (handled in
//! `http/workflows.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use crate::api::listing::paged_list;
use mailroom_actors::engine::workflows::{
    parse_steps as steps_of, step_json, Execution, Step, StepsDocument, Workflow, WorkflowPatch,
};
use mailroom_actors::model::WorkflowId;
use mailroom_actors::{Error, Resource};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiError;
use crate::api::validate::path_id;
use crate::api::wire::{Description, Name, Nullable, Text};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowView {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub enabled: bool,
    pub trigger_event: String,
    pub allow_reentry: bool,
    /// `{id, type, config, next}`; CONDITION has `yes`/`no`, WAIT_FOR_EVENT `timeoutNext`.
    #[schema(value_type = Vec<Object>)]
    pub steps: Vec<Value>,
    pub created_at: String,
    pub updated_at: String,
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

paged_list!(WorkflowList {
    workflows: WorkflowView
});

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryView {
    pub step_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// COMPLETED, FAILED or TIMED_OUT.
    pub status: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A WEBHOOK's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// A CONDITION's branch: yes or no.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionView {
    pub id: String,
    pub workflow_id: String,
    pub contact_id: String,
    /// RUNNING, WAITING, COMPLETED, EXITED, FAILED or CANCELLED.
    pub status: &'static str,
    pub current_step_id: Option<String>,
    pub started_at: String,
    pub completed_at: Option<String>,
    pub history: Vec<HistoryView>,
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

paged_list!(ExecutionList {
    executions: ExecutionView
});

/// Request body of POST /workflows.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateWorkflowRequest {
    pub name: Name,
    pub description: Option<Description>,
    /// Default false.
    pub enabled: Option<bool>,
    /// The event that starts an execution (any event, system events included).
    pub trigger_event: TriggerEvent,
    /// Whether a contact may run it again while an execution of theirs is open; default false.
    pub allow_reentry: Option<bool>,
    pub steps: StepsDocument,
}

/// Request body of PATCH /workflows/{id}: the fields to change; null clears `description`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWorkflowRequest {
    pub name: Option<Name>,
    #[serde(default)]
    pub description: NullableDescription,
    pub enabled: Option<bool>,
    pub trigger_event: Option<TriggerEvent>,
    pub allow_reentry: Option<bool>,
    pub steps: Option<StepsDocument>,
}

type NullableDescription = Nullable<Description>;
/// Any event's name, a system event's too.
type TriggerEvent = Text<200>;

pub fn parse_steps(doc: &StepsDocument) -> Result<Vec<Step>, ApiError> {
    steps_of(&doc.0).map_err(|e| Error::Validation(e).into())
}

pub fn workflow_id(id: &str) -> Result<WorkflowId, ApiError> {
    path_id(id, Resource::Workflow)
}

impl UpdateWorkflowRequest {
    /// The change to make, its steps parsed and their graph checked.
    pub fn into_patch(self) -> Result<WorkflowPatch, ApiError> {
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
