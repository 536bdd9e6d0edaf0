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
    pub max_domains: usize,
    pub max_segments: u64,
    pub max_tracked_segments: usize,
    pub max_templates: usize,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits {
            max_contacts: 2_000_000,
            max_data_bytes: 65_536,
            max_domains: 100,
            max_segments: 1_000,
            max_tracked_segments: 50,
            max_templates: 10_000,
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
    /// may add keys to what earlier calls stored.
    pub fn check_data(&self, data: &Map<String, Value>) -> Result<()> {
        let size = json_len(data);
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

/// The length of `data` as compact JSON (as the per-call limit measures it), counted
/// without building the text.
fn json_len(data: &Map<String, Value>) -> u64 {
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
