//! The Mailroom engine: the domain model, the store and the actors that own each
//! project's writes. Nothing in this crate knows about HTTP.

pub mod clock;
pub mod error;
pub mod idempotency;
pub mod model;
pub mod project;
pub mod projects;
pub mod segment;
pub mod store;

pub use clock::{Clock, SystemClock};
pub use error::{Error, FieldCode, FieldError, Resource};
