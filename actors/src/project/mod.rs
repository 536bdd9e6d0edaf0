//! One ProjectActor per project owns that project's writes, so writes to one project
//! are serialised (no two upserts can create the same email twice) while different
//! projects proceed in parallel on different arbiters. Reads go straight to the store,
//! except those that need every contact (segment counts), which read the project's
//! in-memory contact table (`table`).

pub mod actor;
pub mod contacts;
pub mod event_queries;
pub mod events;
pub mod limits;
pub mod membership;
pub mod messages;
pub mod queries;
pub mod registry;
pub mod segment_queries;
pub mod segments;
pub mod send;
pub mod sending;
pub mod table;
pub mod templates;
pub mod track;

pub use actor::ProjectActor;
pub use limits::TenantLimits;
pub use registry::{Registry, RegistryConfig};
pub use table::ContactTable;
