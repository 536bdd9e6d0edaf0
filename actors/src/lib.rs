//! The Mailroom engine: the domain model, the store and the actors that own each
//! project's writes. Nothing in this crate knows about HTTP.

pub(crate) mod backoff;
pub mod campaign;
pub(crate) mod clock;

pub mod cluster;
pub mod codec;
pub mod contact;
pub mod dns;
pub mod domain;
pub mod email;
pub mod engine;
#[cfg(test)]
mod engine_tests;
pub mod erasure;
pub mod error;
pub mod event;
pub mod faults;
pub mod feedback;
/// Fuzz targets, one function per target taking arbitrary bytes: run by `cargo fuzz`
/// from `fuzz/` and, on the stable toolchain, by `tests/fuzz_replay.rs`. Behind the
/// `fuzzing` feature, which those two turn on: the server does not ship them.
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod id;
pub mod idempotency;
pub mod json_part;
#[cfg(test)]
mod layering;
pub(crate) mod link_state;
pub mod links;
pub mod mailer;
pub mod metrics;
pub mod model;
pub mod near_miss;
pub mod pace;
pub mod project;
pub mod projects;
pub mod render;
pub(crate) mod reputation;
pub mod retention;
pub mod scheduler;
pub mod segment;
pub mod sessions;
pub mod shutdown;
pub mod store;
pub mod suppression;
pub mod template;
pub mod timestamp;
pub mod upgrade;
pub mod verify;
pub mod webhooks;
pub mod wiring;
pub mod workflow;

pub use clock::{AdjustableClock, Clock, SystemClock};
pub use error::{Error, FieldCode, FieldError, Resource};
