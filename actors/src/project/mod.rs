//! One ProjectActor per project owns that project's writes, so writes to one project
//! are serialised (no two upserts can create the same email twice) while different
//! projects proceed in parallel on different arbiters. Reads go straight to the store,
//! except those that need every contact (segment counts), which read the project's
//! in-memory contact table (`table`).

pub mod actor;
pub mod apply;
pub mod attempts;
pub mod counters;
pub mod events;
pub mod hooks;
pub mod limits;
pub mod messages;
mod recorder;
pub mod registry;
pub mod table;
pub mod table_columns;
mod table_load;
pub mod unit;
pub mod wakeups;
pub mod write;

pub use actor::{ActorShared, ProjectActor};
pub use limits::TenantLimits;
pub use registry::{Registry, RegistryConfig};
pub use table::ContactTable;
