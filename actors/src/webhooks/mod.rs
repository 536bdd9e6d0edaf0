//! Event webhooks to the caller (API.md 26): a project's endpoints, each subscribed to
//! event names. The project's event log is the queue: each endpoint keeps a cursor into
//! it, a write of events only notes the project for the delivery loop (`fanout`), and
//! the loop on each node (`deliver`) walks the durable events of the projects the node
//! owns, POSTs each an endpoint wants, signed as Standard Webhooks sign (`sign`),
//! records the outcome, and retries on the configured schedule.

pub mod actions;
pub mod deliver;
pub(crate) mod endpoints;
pub(crate) mod fanout;
mod model;
pub(crate) mod records;
mod sign;

pub use model::{Delivery, Webhook};

/// What the operator set (`[webhooks]`, `limits.max_webhooks`).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Seconds to wait after each failed attempt, in order; past the last, the delivery
    /// has failed for good.
    pub retry_seconds: Vec<u64>,
    pub timeout_ms: u64,
    /// Failures in a row for this long disable the endpoint.
    pub disable_after_hours: u64,
    pub allow_private_addresses: bool,
    pub max_per_project: usize,
    /// Requests under way at once, in all and per endpoint.
    pub max_in_flight: usize,
    pub max_in_flight_per_endpoint: usize,
    /// Requests under way at once for one project's endpoints: a project with several
    /// dead endpoints holds at most this many of the node's slots.
    pub max_in_flight_per_project: usize,
    /// The least time between two rounds of the delivery loop.
    pub round_gap: std::time::Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            retry_seconds: vec![5, 60, 600, 3600, 21600, 43200],
            timeout_ms: 10_000,
            disable_after_hours: 72,
            allow_private_addresses: false,
            max_per_project: 10,
            max_in_flight: 32,
            max_in_flight_per_endpoint: 4,
            max_in_flight_per_project: 16,
            round_gap: std::time::Duration::from_millis(20),
        }
    }
}
