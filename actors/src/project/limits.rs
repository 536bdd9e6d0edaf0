//! What one project may hold (config section `limits`). Every tenant is a stranger to
//! the others: without these, one project's key could fill the process's memory (the
//! contact table holds every contact; every tracked segment is judged on every write)
//! or its disk.

use crate::error::{Error, FieldCode, Result};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy)]
pub struct TenantLimits {
    pub max_contacts: u64,
    /// The largest `data` of one contact as JSON, after every call merged into it.
    pub max_data_bytes: usize,
    /// The `data` of all a project's contacts together, as JSON: the contact table holds
    /// it in memory.
    pub max_project_data_bytes: u64,
    pub max_domains: usize,
    pub max_segments: u64,
    pub max_tracked_segments: usize,
    pub max_templates: usize,
    pub max_campaigns: u64,
    pub max_workflows: u64,
    /// Contacts times filter conditions that one request may judge (see
    /// `segment::budget`).
    pub max_filter_evaluations: u64,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits {
            max_contacts: 2_000_000,
            max_data_bytes: 65_536,
            max_project_data_bytes: 1 << 30,
            max_domains: 100,
            max_segments: 1_000,
            max_tracked_segments: 50,
            max_templates: 10_000,
            max_campaigns: 10_000,
            max_workflows: 1_000,
            max_filter_evaluations: 200_000_000,
        }
    }
}

/// The answer when a project already holds as many `what` as `key` allows.
pub fn full(what: &str, limit: u64, key: &str) -> Error {
    Error::Conflict {
        message: format!("This project already has {limit} {what}, the most it may have"),
        suggestion: Some(format!(
            "Delete {what} it no longer needs, or ask the operator to raise limits.{key}"
        )),
    }
}

impl TenantLimits {
    /// A contact's data after a write; checked on the merged result, since each call
    /// may add keys to what earlier calls stored. `size` is `json_len(data)`.
    pub fn check_data(&self, size: u64) -> Result<()> {
        if size > self.max_data_bytes as u64 {
            return Err(Error::field(
                "data",
                FieldCode::TooBig,
                format!(
                    "The contact's data would be {size} bytes with this change; at most {} \
                     are kept per contact (remove keys with null)",
                    self.max_data_bytes
                ),
            ));
        }
        Ok(())
    }
}

impl TenantLimits {
    /// The project's data total after a write that takes it from `before` to `after`
    /// bytes; growing past the limit is refused, shrinking always allowed.
    pub fn check_project_data(&self, total: u64, before: u64, after: u64) -> Result<u64> {
        let next = total.saturating_sub(before).saturating_add(after);
        if after > before && next > self.max_project_data_bytes {
            return Err(Error::Conflict {
                message: format!(
                    "This project's contacts hold {total} bytes of data; this change would pass \
                     the {} a project may hold",
                    self.max_project_data_bytes
                ),
                suggestion: Some(
                    "Remove data keys that are no longer needed (set them to null), or ask the \
                     operator to raise limits.max_project_data_bytes"
                        .into(),
                ),
            });
        }
        Ok(next)
    }
}

/// The length of `data` as compact JSON (as the per-call limit measures it), counted
/// without building the text.
pub fn json_len(data: &Map<String, Value>) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, data) {
        Ok(()) => count.0,
        Err(_) => u64::MAX,
    }
}
