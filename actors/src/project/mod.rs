//! One ProjectActor per project owns that project's writes, so writes to one project
//! are serialised (no two upserts can create the same email twice) while different
//! projects proceed in parallel on different arbiters. Reads go straight to the store.

pub mod actor;
pub mod contacts;
pub mod event_queries;
pub mod events;
pub mod membership;
pub mod messages;
pub mod queries;
pub mod registry;
pub mod segment_queries;
pub mod segments;
pub mod sending;
pub mod templates;
pub mod track;

pub use actor::ProjectActor;
pub use registry::{Registry, RegistryConfig};
