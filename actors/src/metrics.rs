//! What the engine counts for the operator, read by the edge into `/metrics`. One
//! `Metrics` per engine: the Registry makes it and hands an `Arc` of it to whoever
//! counts (the project actors' writes, the mailers, the verifier, the purge), so two
//! engines in one process count their own work only.
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

/// How many kinds of record the retention purge counts (`retention::Kind`, which checks
/// it); the count is a number here so that the metrics, below every feature, name none.
pub const RETENTION_KINDS: usize = 10;

/// The engine's counters, from zero when it starts.
#[derive(Default)]
pub struct Metrics {
    /// Emails written to the outbox (a send, a campaign's batch, a workflow step).
    pub emails_queued: Counter,
    /// Emails the relay accepted.
    pub emails_sent: Counter,
    /// Emails given up (past the attempts, or refused for their content).
    pub emails_failed: Counter,
    /// Emails the recipient's side refused for good.
    pub emails_bounced: Counter,
    /// Emails a campaign's cancel took out of the outbox.
    pub emails_cancelled: Counter,
    /// Emails rendered for a send, a campaign or a workflow (a replay renders none).
    pub emails_rendered: Counter,
    /// Address verifications answered from the DNS cache, and those that asked DNS.
    pub dns_cache_hits: Counter,
    pub dns_cache_misses: Counter,
    /// Event webhook delivery attempts, by what came of them.
    pub webhooks_delivered: Counter,
    pub webhooks_retried: Counter,
    pub webhooks_failed: Counter,
    /// Mail to a return path and provider callbacks, by what came of it: a report
    /// applied (hard, soft, complaint), mail that was no report (an auto-reply), a
    /// report kept in quarantine because it could not be read.
    pub feedback_hard: Counter,
    pub feedback_soft: Counter,
    pub feedback_complaint: Counter,
    pub feedback_other: Counter,
    pub feedback_quarantined: Counter,
    relay_faults: [Counter; 7],
    executions: [Counter; 5],
    retention_removed: [Counter; RETENTION_KINDS],
}

impl Metrics {
    pub fn relay_fault(&self, class: RelayFault) {
        self.relay_faults[class as usize].add(1);
    }

    pub fn relay_faults(&self, class: RelayFault) -> u64 {
        self.relay_faults[class as usize].get()
    }

    pub fn execution(&self, m: ExecutionMove) {
        self.executions[m.slot()].add(1);
    }

    pub fn executions(&self, m: ExecutionMove) -> u64 {
        self.executions[m.slot()].get()
    }

    /// Records of a kind (`retention::Kind as usize`) the retention purge removed.
    pub fn removed(&self, kind: usize, n: u64) {
        self.retention_removed[kind].add(n);
    }

    pub fn removed_total(&self, kind: usize) -> u64 {
        self.retention_removed[kind].get()
    }
}

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
}

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
}
