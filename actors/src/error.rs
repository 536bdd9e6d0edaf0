//! The engine's error kinds. The HTTP edge maps each kind to exactly one status and
//! one code (see `src/api/error.rs`); nothing else builds an error body.

use std::fmt;

use crate::id::ProjectId;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// One or more fields failed validation (422).
    #[error("Request validation failed")]
    Validation(Vec<FieldError>),
    /// The record does not exist in this project (404).
    #[error("{0} not found")]
    NotFound(Resource),
    /// The request conflicts with the current state (409).
    #[error("{message}")]
    Conflict {
        message: String,
        suggestion: Option<String>,
    },
    /// A bounded mailbox is full; the caller should come back shortly (503).
    #[error("The service is busy, please retry shortly")]
    Busy { retry_after_secs: u64 },
    /// Another node holds the project (or none does yet): the node layer forwards the
    /// request to its owner; a client that still gets this retries (503).
    #[error("this node does not hold the project right now; retry")]
    NotOwner { project: ProjectId },
    /// The data directory is held by another process.
    #[error("the data directory {path} is in use by another process")]
    Locked { path: String },
    /// The store failed; details are logged, never returned to a client.
    #[error("storage error: {0}")]
    Storage(#[source] StorageError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn field(field: impl Into<String>, code: FieldCode, message: impl Into<String>) -> Self {
        Error::Validation(vec![FieldError::new(field, code, message)])
    }

    /// A store failure with no error underneath (a record that does not decode, ...).
    pub fn storage(context: impl Into<String>) -> Self {
        Error::Storage(StorageError {
            context: context.into(),
            source: None,
        })
    }

    /// A store failure caused by `source`.
    pub fn storage_caused(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage(StorageError {
            context: context.into(),
            source: Some(Box::new(source)),
        })
    }

    /// Whether this is a store failure because the disk is full.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::Storage(s) if s.is_disk_full())
    }

    /// Whether this is a store failure that passes by itself (the database did not
    /// answer in time, or could not be reached): the edge answers 503 with Retry-After.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Storage(s) if s.is_unavailable())
    }

    /// A store failure of the kind `is_unavailable` names.
    pub fn unavailable(context: impl Into<String>) -> Self {
        Error::storage_caused(context, std::io::Error::from(std::io::ErrorKind::TimedOut))
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Error::Conflict {
            message: message.into(),
            suggestion: None,
        }
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        Error::storage_caused("the store", e)
    }
}

/// What the store was doing when it failed, and the error underneath when there is one
/// (kept as a source, so the engine's error type does not name sled or serde).
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct StorageError {
    pub context: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StorageError {
    /// The disk (or its quota) is full: an ENOSPC somewhere down the chain. Writes can
    /// succeed again once space is freed, so the edge answers 503, not 500.
    pub fn is_disk_full(&self) -> bool {
        let mut next: Option<&(dyn std::error::Error + 'static)> =
            self.source.as_deref().map(|e| e as _);
        while let Some(e) = next {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::StorageFull
                    || io.kind() == std::io::ErrorKind::QuotaExceeded
                    || io.raw_os_error() == Some(28)
                {
                    return true;
                }
            }
            if let Some(sled::Error::Io(io)) = e.downcast_ref::<sled::Error>() {
                if io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28) {
                    return true;
                }
            }
            next = e.source();
        }
        false
    }
}

impl StorageError {
    /// A timeout or a lost connection somewhere down the chain.
    pub fn is_unavailable(&self) -> bool {
        let mut next: Option<&(dyn std::error::Error + 'static)> =
            self.source.as_deref().map(|e| e as _);
        while let Some(e) = next {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::NotConnected
                ) {
                    return true;
                }
            }
            next = e.source();
        }
        false
    }
}

/// Field-level detail of a 422, with zod's codes so that Plunk clients understand them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub code: FieldCode,
    pub message: String,
    /// What to do about it, when the engine knows better than "fix the field": the
    /// edge answers it as the error's `suggestion`.
    pub suggestion: Option<String>,
}

impl FieldError {
    pub fn new(field: impl Into<String>, code: FieldCode, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            code,
            message: message.into(),
            suggestion: None,
        }
    }

    pub fn suggesting(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldCode {
    InvalidType,
    InvalidString,
    TooSmall,
    TooBig,
    InvalidEnumValue,
    Custom,
    UnverifiedDomain,
    ReservedEvent,
    TemplateSyntax,
    /// A field the request does not know that is a near miss of one it does.
    UnrecognizedKeys,
}

impl FieldCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldCode::InvalidType => "invalid_type",
            FieldCode::InvalidString => "invalid_string",
            FieldCode::TooSmall => "too_small",
            FieldCode::TooBig => "too_big",
            FieldCode::InvalidEnumValue => "invalid_enum_value",
            FieldCode::Custom => "custom",
            FieldCode::UnverifiedDomain => "unverified_domain",
            FieldCode::ReservedEvent => "reserved_event",
            FieldCode::TemplateSyntax => "template_syntax",
            FieldCode::UnrecognizedKeys => "unrecognized_keys",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            FieldCode::InvalidType,
            FieldCode::InvalidString,
            FieldCode::TooSmall,
            FieldCode::TooBig,
            FieldCode::InvalidEnumValue,
            FieldCode::Custom,
            FieldCode::UnverifiedDomain,
            FieldCode::ReservedEvent,
            FieldCode::TemplateSyntax,
            FieldCode::UnrecognizedKeys,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// A serde error that keeps its field code: wire types that check their value while they
/// deserialize (an email address, a bounded string) raise it, and the HTTP edge, which
/// knows the field's path, turns it back into a `FieldError` (see `src/api/body.rs`).
pub fn field_de_error<E: serde::de::Error>(code: FieldCode, message: impl fmt::Display) -> E {
    E::custom(format_args!(
        "{}{FIELD_CODE_SEPARATOR}{message}",
        code.as_str()
    ))
}

/// An error and each of its sources, for a log line or a stored `lastError`:
/// `storage error: the store: No space left on device`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(source) = next {
        // Many errors also print their source in their own words (this crate's
        // `Storage`, tokio-postgres's, deadpool's): said once is enough.
        let text = source.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = source.source();
    }
    out
}

/// Between the code and the message in a `field_de_error`.
pub const FIELD_CODE_SEPARATOR: &str = ": ";

/// The kinds of record a 404 can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Contact,
    Template,
    Campaign,
    Segment,
    Workflow,
    Domain,
    Email,
    Event,
    Execution,
    Project,
    Import,
    Webhook,
    Suppression,
    Route,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Resource::Contact => "Contact",
            Resource::Template => "Template",
            Resource::Campaign => "Campaign",
            Resource::Segment => "Segment",
            Resource::Workflow => "Workflow",
            Resource::Domain => "Domain",
            Resource::Email => "Email",
            Resource::Event => "Event",
            Resource::Execution => "Execution",
            Resource::Import => "Import",
            Resource::Webhook => "Webhook",
            Resource::Suppression => "Suppression",
            Resource::Project => "Project",
            Resource::Route => "Route",
        };
        f.write_str(s)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_says_each_cause_once_where_an_error_also_prints_its_source() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::storage_caused("connecting to PostgreSQL at db:5432", refused);
        assert_eq!(
            chain(&e),
            "storage error: connecting to PostgreSQL at db:5432: refused"
        );
    }
}
