//! The node layer of a cluster (`storage.backend = "postgres"`): who this node is, which
//! node should own each project, the lease loop that makes it so, and the forwarding of a
//! request to the project's owner. docs/cluster.md.

pub mod identity;
pub mod node;
pub mod rendezvous;
pub mod replay;

pub use identity::Identity;
pub use node::{ClusterNode, Route};
