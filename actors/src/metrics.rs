//! What the engine counts for the operator: process-wide counters that the edge reads
//! into `/metrics`. Globals, because what counts (the SMTP pool, the verifier's
//! cache, a project's write) has no registry at hand, and a counter is one atomic add.
//!
//! Each label takes a small fixed set of values (the enums here), never an id, so a
//! tenant cannot grow the series.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::ExecStatus;

/// A counter that only goes up, from zero at start-up.
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Emails written to the outbox (a send, a campaign's batch, a workflow step).
pub static EMAILS_QUEUED: Counter = Counter::new();
/// Emails the relay accepted.
pub static EMAILS_SENT: Counter = Counter::new();
/// Emails given up (past the attempts, or refused for their content).
pub static EMAILS_FAILED: Counter = Counter::new();
/// Emails the recipient's side refused for good.
pub static EMAILS_BOUNCED: Counter = Counter::new();
/// Emails a campaign's cancel took out of the outbox.
pub static EMAILS_CANCELLED: Counter = Counter::new();
/// Batches the store applied: one per write message (a send, a bounce, a track), so
/// a rate of this against requests shows a write that takes more than one.
pub static STORE_BATCHES: Counter = Counter::new();
/// Emails rendered for a send, a campaign or a workflow (a replay renders none).
pub static EMAILS_RENDERED: Counter = Counter::new();
/// Address verifications answered from the DNS cache, and those that asked DNS.
pub static DNS_CACHE_HITS: Counter = Counter::new();
pub static DNS_CACHE_MISSES: Counter = Counter::new();

/// Why an attempt to hand an email to the relay did not end in the recipient's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayFault {
    /// No TCP connection (refused, unreachable, closed before the greeting).
    Connect,
    /// The TLS handshake or STARTTLS failed, or STARTTLS was not offered.
    Tls,
    /// The relay refused our login.
    Auth,
    /// The relay did not answer within `smtp.timeout_ms`.
    Timeout,
    /// A temporary refusal (4xx).
    Refused4xx,
    /// A permanent refusal of us or of the message, not of the recipient (5xx).
    Refused5xx,
    /// Anything else (a broken connection mid-transaction, a check of ours).
    Other,
}

impl RelayFault {
    pub const ALL: [RelayFault; 7] = [
        RelayFault::Connect,
        RelayFault::Tls,
        RelayFault::Auth,
        RelayFault::Timeout,
        RelayFault::Refused4xx,
        RelayFault::Refused5xx,
        RelayFault::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RelayFault::Connect => "connect",
            RelayFault::Tls => "tls",
            RelayFault::Auth => "auth",
            RelayFault::Timeout => "timeout",
            RelayFault::Refused4xx => "refused_4xx",
            RelayFault::Refused5xx => "refused_5xx",
            RelayFault::Other => "other",
        }
    }

    pub fn count(self) {
        RELAY_FAULTS[self as usize].add(1);
    }

    pub fn total(self) -> u64 {
        RELAY_FAULTS[self as usize].get()
    }
}

static RELAY_FAULTS: [Counter; 7] = [const { Counter::new() }; 7];

/// What happened to workflow executions: `Started`, or the final status they reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionMove {
    Started,
    Ended(ExecStatus),
}

impl ExecutionMove {
    pub const ALL: [ExecutionMove; 5] = [
        ExecutionMove::Started,
        ExecutionMove::Ended(ExecStatus::Completed),
        ExecutionMove::Ended(ExecStatus::Exited),
        ExecutionMove::Ended(ExecStatus::Failed),
        ExecutionMove::Ended(ExecStatus::Cancelled),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionMove::Started => "started",
            ExecutionMove::Ended(ExecStatus::Completed) => "completed",
            ExecutionMove::Ended(ExecStatus::Exited) => "exited",
            ExecutionMove::Ended(ExecStatus::Failed) => "failed",
            ExecutionMove::Ended(ExecStatus::Cancelled) => "cancelled",
            // Not final: `executions::end` is never given these.
            ExecutionMove::Ended(ExecStatus::Running | ExecStatus::Waiting) => "started",
        }
    }

    fn slot(self) -> usize {
        Self::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }

    pub fn count(self) {
        EXECUTIONS[self.slot()].add(1);
    }

    pub fn total(self) -> u64 {
        EXECUTIONS[self.slot()].get()
    }
}

static EXECUTIONS: [Counter; 5] = [const { Counter::new() }; 5];
