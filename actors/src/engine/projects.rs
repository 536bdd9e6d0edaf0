//! Projects and their keys (the admin API, the CLI and routing read them), and the
//! dashboard's sign-in sessions.

pub use crate::directory::{IssuedKeys, Missing, Projects, MAX_NAME_LEN};
pub use crate::sessions::{Principal, Session, SessionRecords, MAX_PER_PRINCIPAL};

use std::sync::Arc;

use crate::domain::{Domain, DomainName};
use crate::error::Result;
use crate::model::{Project, ProjectId, Timestamp};
use crate::project::Registry;
use crate::store::Store;
use crate::Clock;

/// `engine.admin()`: the operator's writes to projects, each durable when it answers.
/// Owned, for the control socket's tasks too.
#[derive(Clone)]
pub struct Admin {
    pub(super) projects: Projects,
    pub(super) registry: Registry,
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
}

impl Admin {
    /// The projects and their keys.
    pub fn projects(&self) -> &Projects {
        &self.projects
    }

    /// A new project with its two keys, shown this once.
    pub async fn create(&self, name: &str) -> Result<IssuedKeys> {
        let now = Timestamp::from(self.clock.now());
        let issued = self.projects.create(name, now)?;
        self.store.durable().await?;
        Ok(issued)
    }

    pub async fn set_disabled(&self, id: ProjectId, disabled: bool) -> Result<Project> {
        let project = self.projects.set_disabled(id, disabled)?;
        self.store.durable().await?;
        Ok(project)
    }

    /// New keys for the project; the old ones stop working at once.
    pub async fn rotate_keys(&self, id: ProjectId) -> Result<IssuedKeys> {
        let now = Timestamp::from(self.clock.now());
        let issued = self.projects.rotate_keys(id, now)?;
        self.store.durable().await?;
        Ok(issued)
    }

    /// Marks the project's domain verified without DNS, adding it if the project lacks
    /// it (404 for no such project).
    pub async fn trust_domain(&self, id: ProjectId, name: DomainName) -> Result<Domain> {
        self.projects.get(id)?;
        crate::domain::actions::trust(&self.registry, id, name).await
    }
}
