//! The engine's reads and writes for the command line when no server runs on the data
//! directory (or through the control socket, which reads the store whole): a store
//! opened by the caller, and no actors.

pub use crate::campaign::records::each as each_campaign;
pub use crate::contact::queries::each_contact;
pub use crate::domain::queries::list_domains;
pub use crate::event::queries::each_event;
pub use crate::segment::queries::{each_segment, static_members};
pub use crate::template::records::each as each_template;
pub use crate::upgrade::{open as open_sled, upgrade, KEY_FORMAT};
pub use crate::workflow::records::each as each_workflow;

use crate::directory::{IssuedKeys, Projects};
use crate::domain::{Domain, DomainName};
use crate::error::Result;
use crate::model::{Project, ProjectId, Timestamp};
use crate::store::Store;

/// Marks `name` verified for project `p` without DNS, adding it (with a new DKIM key)
/// when the project lacks it, within `max_domains`.
pub fn trust_domain(
    store: &dyn Store,
    p: ProjectId,
    name: DomainName,
    now: Timestamp,
    max_domains: usize,
) -> Result<Domain> {
    let msg = crate::domain::messages::CreateDomain::generate(name)?;
    crate::domain::records::trust_within(store, p, msg, now, max_domains)
}

/// A new project with its two keys, written to the store `projects` reads (the caller
/// flushes it).
pub fn create_project(projects: &Projects, name: &str, now: Timestamp) -> Result<IssuedKeys> {
    projects.create(name, now)
}

pub fn set_project_disabled(projects: &Projects, id: ProjectId, disabled: bool) -> Result<Project> {
    projects.set_disabled(id, disabled)
}

/// New keys for the project; the old ones stop working at once.
pub fn rotate_project_keys(
    projects: &Projects,
    id: ProjectId,
    now: Timestamp,
) -> Result<IssuedKeys> {
    projects.rotate_keys(id, now)
}
