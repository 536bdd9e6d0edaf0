//! Delivery: the durable outbox, the Dispatcher that paces and hands out its entries,
//! and the pool of MailerActors that speak SMTP (or write files).
//!
//! ```text
//! ProjectActor --(email record + outbox key, one batch)--> store --notify--> Dispatcher
//! Dispatcher --Deliver--> MailerActor (round robin) --SMTP--> relay
//! Dispatcher <--outcome-- MailerActor;  Dispatcher --RecordDelivery--> ProjectActor
//! ```
//! The queue lives in the store, not in mailboxes, so a flood of sends costs disk, not
//! memory, and a restart resumes where the last run stopped.

pub mod actor;
pub mod dispatcher;
pub mod dkim;
pub mod document;
pub mod messages;
pub mod mime;
pub mod outbox;
pub mod plain_text;
pub mod return_path;
pub mod smtp;
pub mod tls;

pub use actor::{MailerActor, TransportConfig};
pub use dispatcher::{Dispatcher, DispatcherConfig};
pub use tls::SmtpSecurity;

/// What is needed to DKIM-sign mail from one verified domain.
#[derive(Debug, Clone)]
pub struct DkimParams {
    pub domain: String,
    pub selector: String,
    /// PKCS#1 PEM, as lettre reads it.
    pub private_key_pem: String,
    /// The return path's domain `psrp.<domain>` was verified to point at: the envelope
    /// sender goes there when it is the one configured.
    pub aligned_return_path: Option<String>,
}

/// Finds the signing key for a sender address of a project, or says why it cannot be
/// had now (the domain is no longer verified, or the store failed). Mail is never sent
/// unsigned: without a key the email waits and is retried.
pub type DkimLookup = std::sync::Arc<
    dyn Fn(crate::model::ProjectId, &crate::model::EmailAddress) -> Result<DkimParams, NoKey>
        + Send
        + Sync,
>;

/// Why a sender has no signing key now.
#[derive(Debug, thiserror::Error)]
pub enum NoKey {
    #[error("reading the DKIM key of {domain}")]
    Store {
        domain: String,
        #[source]
        source: crate::Error,
    },
    #[error("{0} is not a verified domain of this project now; the email waits for it (mail is never sent unsigned)")]
    Unverified(String),
}
