//! Network peers for the tests and the bench. They are real servers on loopback that
//! speak the protocol, not mocks of Mailroom's own parts.

pub mod smtp;

pub use smtp::{Received, SmtpServer};
