//! What a write needs from the project's actor: the store, the project, the segments
//! judged on each contact change, the contact table, the time, the tenant's limits
//! and the engine's workflow starts.
//! Shared by every feature that writes contacts, so it lives apart from all of them.

use super::limits::TenantLimits;
use super::membership::Audience;
use super::starts::Starts;
use super::table::ContactTable;
use crate::metrics::Metrics;
use crate::model::{ProjectId, Timestamp};
use crate::store::Store;

pub struct WriteCtx<'a> {
    pub store: &'a dyn Store,
    pub project: ProjectId,
    pub audience: &'a Audience,
    /// The project's contacts in memory; the write path reads contacts from here.
    pub table: &'a ContactTable,
    pub now: Timestamp,
    pub limits: &'a TenantLimits,
    /// Where the events of a write start and wake workflow executions.
    pub starts: &'a Starts,
    /// The engine's counters (what `/metrics` shows).
    pub metrics: &'a Metrics,
}
