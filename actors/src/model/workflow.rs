//! A workflow (API.md section 10): a trigger event and a graph of steps, and the
//! executions that walk it, one per contact that entered it.
//!
//! Steps are checked when a workflow is saved (`workflow::steps`), so a stored graph
//! always starts at its first step, names only its own steps, has no cycle and reaches
//! every step. JSON parts (a condition, contact data, a webhook body) are kept as text:
//! the store's encoding has no place for free-form JSON values.

use serde::{Deserialize, Serialize};

use super::{ContactId, ExecutionId, TemplateId, Timestamp, WorkflowId};
use crate::error::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DelayUnit {
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl DelayUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            DelayUnit::Seconds => "seconds",
            DelayUnit::Minutes => "minutes",
            DelayUnit::Hours => "hours",
            DelayUnit::Days => "days",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "seconds" => Some(DelayUnit::Seconds),
            "minutes" => Some(DelayUnit::Minutes),
            "hours" => Some(DelayUnit::Hours),
            "days" => Some(DelayUnit::Days),
            _ => None,
        }
    }

    pub fn millis(self) -> i64 {
        match self {
            DelayUnit::Seconds => 1_000,
            DelayUnit::Minutes => 60_000,
            DelayUnit::Hours => 3_600_000,
            DelayUnit::Days => 86_400_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepKind {
    SendEmail {
        template_id: TemplateId,
    },
    Delay {
        amount: u64,
        unit: DelayUnit,
    },
    WaitForEvent {
        event_name: String,
        timeout_seconds: u64,
    },
    /// `{field, operator, value, unit?}` of the segment filter language, as JSON.
    Condition {
        condition: String,
    },
    UpdateContact {
        /// A JSON object merged into the contact's data.
        data: Option<String>,
        subscribed: Option<bool>,
    },
    Webhook {
        url: String,
        method: String,
        headers: Vec<(String, String)>,
        /// JSON, sent as the request's `body` field.
        body: Option<String>,
    },
    Exit,
}

impl StepKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            StepKind::SendEmail { .. } => "SEND_EMAIL",
            StepKind::Delay { .. } => "DELAY",
            StepKind::WaitForEvent { .. } => "WAIT_FOR_EVENT",
            StepKind::Condition { .. } => "CONDITION",
            StepKind::UpdateContact { .. } => "UPDATE_CONTACT",
            StepKind::Webhook { .. } => "WEBHOOK",
            StepKind::Exit => "EXIT",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    pub kind: StepKind,
    pub next: Option<String>,
    /// CONDITION's branches.
    pub yes: Option<String>,
    pub no: Option<String>,
    /// WAIT_FOR_EVENT's branch when the event does not come in time.
    pub timeout_next: Option<String>,
}

/// What a caller chooses of a new workflow; the engine gives it its id and times
/// (`workflow::actions::create`).
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    pub name: String,
    pub description: Option<String>,
    pub enabled: bool,
    pub trigger_event: String,
    pub allow_reentry: bool,
    pub steps: Vec<Step>,
}

impl NewWorkflow {
    /// The workflow as it is stored first, made and changed at `now` (ms).
    pub(crate) fn made(self, now: i64) -> Workflow {
        Workflow {
            id: WorkflowId::new(),
            name: self.name,
            description: self.description,
            enabled: self.enabled,
            trigger_event: self.trigger_event,
            allow_reentry: self.allow_reentry,
            steps: self.steps,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    pub id: WorkflowId,
    pub name: String,
    pub description: Option<String>,
    pub enabled: bool,
    pub trigger_event: String,
    pub allow_reentry: bool,
    pub steps: Vec<Step>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Workflow {
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub fn first(&self) -> Option<&Step> {
        self.steps.first()
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::codec::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        crate::codec::decode(bytes)
    }

    pub fn created(&self) -> Timestamp {
        self.created_at.into()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecStatus {
    Running,
    Waiting,
    Completed,
    Exited,
    Failed,
    Cancelled,
}

impl ExecStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecStatus::Running => "RUNNING",
            ExecStatus::Waiting => "WAITING",
            ExecStatus::Completed => "COMPLETED",
            ExecStatus::Exited => "EXITED",
            ExecStatus::Failed => "FAILED",
            ExecStatus::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ExecStatus::Running,
            ExecStatus::Waiting,
            ExecStatus::Completed,
            ExecStatus::Exited,
            ExecStatus::Failed,
            ExecStatus::Cancelled,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    /// Whether the execution is over.
    pub fn is_final(self) -> bool {
        !matches!(self, ExecStatus::Running | ExecStatus::Waiting)
    }
}

/// One step's end, in an execution's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub step_id: String,
    pub kind: String,
    /// COMPLETED, FAILED or TIMED_OUT.
    pub status: String,
    pub at: i64,
    pub error: Option<String>,
    /// A WEBHOOK's answer.
    pub status_code: Option<u16>,
    /// A CONDITION's: "yes" or "no".
    pub branch: Option<String>,
}

/// What a WAITING execution waits for: a due time (a DELAY's end or a wait's
/// timeout), and for WAIT_FOR_EVENT the event, with where each outcome leads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    pub due: i64,
    pub event: Option<String>,
    /// The step after the event (WAIT_FOR_EVENT) or after the delay (DELAY).
    pub next: Option<String>,
    /// WAIT_FOR_EVENT's step after the timeout.
    pub timeout_next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    pub id: ExecutionId,
    pub workflow_id: WorkflowId,
    pub contact_id: ContactId,
    pub status: ExecStatus,
    /// The step to run (RUNNING), being waited on (WAITING), or where it ended.
    pub current: Option<String>,
    pub started_at: i64,
    pub completed_at: Option<i64>,
    pub history: Vec<HistoryEntry>,
    pub wait: Option<Wait>,
}

impl Execution {
    pub fn encode(&self) -> Result<Vec<u8>> {
        crate::codec::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        crate::codec::decode(bytes)
    }
}
