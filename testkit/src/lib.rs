//! Network peers for the tests and the bench (SMTP, DNS, an HTTP server for webhooks). They are real servers on
//! loopback that speak the protocol, not mocks of Mailroom's own parts.

pub mod dns;
pub mod http;
pub mod https;
pub mod skip;
pub mod smtp;
pub mod tls;

pub use dns::TestDns;
pub use http::{Hit, HookServer};
pub use https::FileServer;
pub use skip::skipped;
pub use smtp::{Auth, Received, SmtpServer, Stage, TlsMode};
