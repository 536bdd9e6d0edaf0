//! Workflows beyond their records (which `project::workflows` writes): the steps'
//! JSON form and graph check, the executor pool, and the webhook client.

pub mod executor;
pub mod schema;
pub mod steps;
pub mod webhook;

pub use executor::{ExecutorConfig, Executors};
pub use schema::StepsDocument;
pub use webhook::WebhookClient;
