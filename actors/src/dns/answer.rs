//! What a lookup tells: records, a definite "none" (NODATA or NXDOMAIN), or nothing
//! at all (the nameserver failed or did not answer in time). Callers must not read a
//! failure as "none": a dead nameserver is no evidence that a record is missing.

use std::fmt;
use std::time::Instant;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<T> {
    Found(T),
    /// NODATA (`name_exists`) or NXDOMAIN.
    NoRecords {
        name_exists: bool,
    },
    Failed(DnsFailure),
}

impl<T> Answer<T> {
    /// Records, or NODATA: either way the name is there.
    pub fn name_exists(&self) -> bool {
        matches!(
            self,
            Answer::Found(_) | Answer::NoRecords { name_exists: true }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsFailure {
    Timeout,
    Error(String),
}

impl std::error::Error for DnsFailure {}

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsFailure::Timeout => f.write_str("the nameserver did not answer in time"),
            DnsFailure::Error(e) => write!(f, "the lookup failed: {e}"),
        }
    }
}

/// An answer and how long it may be reused (TTL, or the negative TTL).
#[derive(Debug, Clone)]
pub struct Reply<T> {
    pub answer: Answer<T>,
    pub valid_until: Instant,
}

impl<T> Reply<T> {
    pub fn new(answer: Answer<T>, valid_until: Instant) -> Self {
        Reply {
            answer,
            valid_until,
        }
    }

    /// Failures are never reused.
    pub fn failed(failure: DnsFailure) -> Self {
        Reply {
            answer: Answer::Failed(failure),
            valid_until: Instant::now(),
        }
    }

    pub fn failure(&self) -> Option<&DnsFailure> {
        match &self.answer {
            Answer::Failed(f) => Some(f),
            _ => None,
        }
    }
}
