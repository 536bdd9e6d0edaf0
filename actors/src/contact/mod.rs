//! Contacts: their records and writes (`records`: upsert, patch, delete), the writes
//! the edge calls (`actions`), the read queries, the bulk import and the runner that
//! drives its durable slices, and the record of an erasure under way (the erasure
//! itself is `crate::erasure`).

pub mod actions;
pub mod erasure_record;
pub mod import;
pub(crate) mod import_erasure;
pub(crate) mod import_retention;
pub mod import_runner;
pub mod queries;
pub mod records;
