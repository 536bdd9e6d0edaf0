//! The typed requests and views of the admin endpoints (handled in
//! `http/admin.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use mailroom_actors::engine::projects::IssuedKeys;
use mailroom_actors::model::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Request body of POST /admin/projects.
#[derive(Deserialize, ToSchema)]
pub struct CreateProjectRequest {
    pub name: ProjectName,
}

type ProjectName = crate::api::wire::Text<{ mailroom_actors::engine::projects::MAX_NAME_LEN }>;

/// Request body of POST /admin/clock/advance.
#[derive(Deserialize, ToSchema)]
pub struct AdvanceClockRequest {
    /// Milliseconds to move forward: a whole number from 0 to a century.
    #[schema(maximum = 3_162_240_000_000_u64)]
    pub ms: u64,
}

#[derive(Serialize, ToSchema)]
pub struct ClockView {
    pub now: String,
}

/// The CLI prints what the admin API answers.
pub fn keys_json(k: &IssuedKeys) -> serde_json::Value {
    serde_json::to_value(KeysView::from(k)).unwrap_or_default()
}

pub fn project_json(p: &mailroom_actors::model::Project) -> serde_json::Value {
    serde_json::to_value(ProjectView::from(p)).unwrap_or_default()
}

/// The keys of a new or re-keyed project, shown once.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeysView {
    pub id: String,
    pub name: String,
    pub secret_key: String,
    pub public_key: String,
}

impl From<&IssuedKeys> for KeysView {
    fn from(k: &IssuedKeys) -> Self {
        KeysView {
            id: k.project.id.to_string(),
            name: k.project.name.clone(),
            secret_key: k.secret_key.expose().to_owned(),
            public_key: k.public_key.expose().to_owned(),
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectView {
    pub id: String,
    pub name: String,
    pub disabled: bool,
    pub created_at: String,
}

impl From<&mailroom_actors::model::Project> for ProjectView {
    fn from(p: &mailroom_actors::model::Project) -> Self {
        ProjectView {
            id: p.id.to_string(),
            name: p.name.clone(),
            disabled: p.disabled,
            created_at: Timestamp::from(p.created_at).to_iso(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct ProjectList {
    pub projects: Vec<ProjectView>,
}
