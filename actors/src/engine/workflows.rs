//! The workflows' door.

pub use crate::model::{ExecStatus, Execution, NewWorkflow, Step, Workflow};
pub use crate::workflow::records::WorkflowPatch;
pub use crate::workflow::steps::{parse as parse_steps, to_json as step_json};
pub use crate::workflow::StepsDocument;

use super::{off_thread, Engine};
use crate::error::Result;
use crate::model::{ExecutionId, Page, PageRequest, ProjectId, WorkflowId};
use crate::workflow::{actions, records};

/// `engine.workflows()`.
pub struct Workflows<'e>(pub(super) &'e Engine);

impl Workflows<'_> {
    pub async fn create(&self, p: ProjectId, new: NewWorkflow) -> Result<Workflow> {
        actions::create(&self.0.registry, p, new).await
    }

    /// The workflow, or 404.
    pub fn get(&self, p: ProjectId, id: WorkflowId) -> Result<Workflow> {
        records::get(&*self.0.store, p, id)
    }

    pub async fn list(&self, p: ProjectId, page: PageRequest) -> Result<Page<Workflow>> {
        let store = self.0.store.clone();
        off_thread(move || records::list(&*store, p, &page)).await
    }

    pub async fn update(
        &self,
        p: ProjectId,
        id: WorkflowId,
        patch: WorkflowPatch,
    ) -> Result<Workflow> {
        actions::update(&self.0.registry, p, id, patch).await
    }

    pub async fn delete(&self, p: ProjectId, id: WorkflowId) -> Result<()> {
        actions::delete(&self.0.registry, p, id).await
    }

    /// A page of the workflow's executions, newest first, of one status or all (404 for
    /// no such workflow).
    pub async fn executions(
        &self,
        p: ProjectId,
        id: WorkflowId,
        status: Option<ExecStatus>,
        page: PageRequest,
    ) -> Result<Page<Execution>> {
        let store = self.0.store.clone();
        off_thread(move || {
            records::get(&*store, p, id)?;
            records::executions(&*store, p, id, status, &page)
        })
        .await
    }

    /// One execution of the workflow, or 404.
    pub fn execution(&self, p: ProjectId, id: WorkflowId, x: ExecutionId) -> Result<Execution> {
        records::get(&*self.0.store, p, id)?;
        records::execution(&*self.0.store, p, id, x)
    }
}
