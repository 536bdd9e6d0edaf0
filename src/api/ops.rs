//! The typed requests and views of the ops endpoints (handled in
//! `http/ops.rs`, shared with the dashboard, the export and the control socket): the
//! wire shapes, which are also the OpenAPI schema.

use serde::Serialize;
use utoipa::ToSchema;

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub status: &'static str,
    pub version: &'static str,
    /// `sled` or `postgres`.
    pub backend: &'static str,
    /// This node's `cluster.node_id` (with sled too, where it names the server).
    pub node_id: String,
    /// Projects whose lease this node holds; with sled, every project.
    pub projects_owned: usize,
    /// The nodes this one saw alive at its last lease tick (1 with sled).
    pub live_nodes: usize,
}
