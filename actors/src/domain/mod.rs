//! Sender domains: a project proves it owns a domain and publishes the DKIM key that
//! signs its mail (API.md section 11). Writes go through the project's actor; DNS
//! checks run before the message is sent, so the actor never waits on DNS.

pub mod actions;
pub mod check;
pub mod dkim;
pub mod handlers;
pub mod messages;
pub mod model;
pub mod queries;
pub mod records;
pub mod sender;
pub mod verifier;

pub use crate::dns::name::DomainName;
pub use check::DomainCheck;
pub use model::{Domain, DomainStatus, RecordPolicy};
pub use sender::verified_sender;
pub use verifier::{check_now, DomainVerifier};
