//! Workflows: their records (`records`), executions and the triggers that start them
//! from events, the steps' JSON form and graph check, the executor pool, and the
//! webhook client.

pub mod actions;
pub(crate) mod entry_retention;
pub(crate) mod erasure;
pub mod executions;
pub mod executor;
pub mod records;
pub(crate) mod retention;
pub mod schema;
pub mod steps;
pub mod triggers;
pub mod webhook;

pub use executor::{ExecutorConfig, Executors};
pub use schema::StepsDocument;
pub use webhook::WebhookClient;
