//! What a write needs from the project's actor: the store, the project, the features'
//! states that judge each contact change (the segments), the contact table, the time, the tenant's limits
//! the engine's workflow starts, and the features' hooks.
//! Shared by every feature that writes contacts, so it lives apart from all of them.

use super::hooks::{Hooks, States};
use super::limits::TenantLimits;
use super::table::ContactTable;
use super::wakeups::Wakeups;
use crate::metrics::Metrics;
use crate::model::{ProjectId, Timestamp};
use crate::store::Store;

pub struct WriteCtx<'a> {
    pub store: &'a dyn Store,
    pub project: ProjectId,
    /// The features' states in the actor (see `hooks::ProjectState`).
    pub states: &'a States,
    /// The project's contacts in memory; the write path reads contacts from here.
    pub table: &'a ContactTable,
    pub now: Timestamp,
    pub limits: &'a TenantLimits,
    /// Where the events of a write start and wake workflow executions.
    pub wakeups: &'a Wakeups,
    /// The engine's counters (what `/metrics` shows).
    pub metrics: &'a Metrics,
    /// What the features do inside this write (see `hooks`).
    pub hooks: &'a Hooks,
}
