//! Campaigns beyond their records (which `project::campaigns` writes): the audience,
//! the runner that queues a sending campaign in batches, the use cases the HTTP edge
//! calls, and the signed links of marketing mail.

pub mod actions;
pub mod audience;
pub mod link_state;
pub mod links;
pub mod runner;
pub mod token;
pub mod unsubscribe;

pub use runner::{Campaigns, RunnerConfig};
