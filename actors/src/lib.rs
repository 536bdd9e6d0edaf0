//! The Mailroom engine: the domain model, the store and the actors that own each
//! project's writes. Nothing in this crate knows about HTTP.
//!
//! One door: everything outside reaches the engine through [`engine::Engine`], started
//! with `Engine::start(config, store, clock, ownership)`, and its handles, one per
//! feature (`engine.campaigns().create(p, new)`, `.get`, `.list`, ...), plus the types
//! they speak: [`model`], [`error`] and the [`store`] to open. Every other module is
//! `pub(crate)`, so the compiler keeps the server out of the engine's inside:
//!
//! ```
//! // Through the door: compiles.
//! use mailroom_actors::engine::campaigns::{Campaign, NewCampaign};
//! use mailroom_actors::engine::Engine;
//! ```
//!
//! ```compile_fail,E0603
//! // Past it: an inner module is the engine's own, and this does not compile.
//! use mailroom_actors::campaign::actions;
//! ```

pub(crate) mod backoff;
pub(crate) mod campaign;
pub(crate) mod clock;

pub(crate) mod cluster;
pub mod codec;
pub(crate) mod contact;
pub(crate) mod directory;
pub(crate) mod dns;
pub(crate) mod domain;
pub(crate) mod email;
pub mod engine;
#[cfg(test)]
mod engine_tests;
pub(crate) mod erasure;
pub mod error;
pub(crate) mod event;
pub(crate) mod faults;
pub(crate) mod feedback;
/// Fuzz targets, one function per target taking arbitrary bytes: run by `cargo fuzz`
/// from `fuzz/` and, on the stable toolchain, by `tests/fuzz_replay.rs`. Behind the
/// `fuzzing` feature, which those two turn on: the server does not ship them.
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod id;
pub(crate) mod idempotency;
pub(crate) mod json_part;
#[cfg(test)]
mod layering;
pub(crate) mod link_generation;
pub(crate) mod links;
pub(crate) mod mailer;
pub(crate) mod metrics;
pub mod model;
pub(crate) mod near_miss;
pub(crate) mod pace;
pub(crate) mod parts;
pub(crate) mod project;
pub(crate) mod render;
pub(crate) mod reputation;
pub(crate) mod retention;
pub(crate) mod scheduler;
pub(crate) mod segment;
pub(crate) mod sessions;
pub(crate) mod shutdown;
pub mod store;
pub(crate) mod suppression;
pub(crate) mod template;
pub mod timestamp;
pub(crate) mod upgrade;
pub(crate) mod verify;
pub(crate) mod webhooks;
pub(crate) mod wiring;
pub(crate) mod workflow;

pub use clock::{AdjustableClock, Clock, SystemClock};
pub use error::{Error, FieldCode, FieldError, Resource};
