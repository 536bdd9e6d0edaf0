//! Tests of the engine as a whole, inside the crate since they reach past the door:
//! projects handed over between engines (one store, two registries; sled and
//! PostgreSQL), two engines in one process, the hooks each feature registers, panics the
//! supervisors contain, and a damaged store.

#[allow(dead_code)]
mod common;

mod damaged;
mod handover;
mod handover_campaign;
mod handover_mailer;
mod handover_postgres;
mod hooks;
mod panics;
mod two_engines;
