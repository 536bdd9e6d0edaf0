//! Messages of the mailer pool.

use actix::Message;

use super::DkimParams;
use crate::model::OutboundEmail;

/// Send one email now.
#[derive(Debug, Message)]
#[rtype(result = "Delivery")]
pub struct Deliver {
    pub email: OutboundEmail,
    /// Always given: mail is never sent unsigned (see `DkimLookup`).
    pub dkim: DkimParams,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// 4xx, a timeout or a refused connection: try again later.
    Transient(String),
    /// The recipient refused for good (5xx to RCPT TO, or a 5.1.x/5.2.x status after
    /// DATA): a bounce, which suppresses the address.
    Permanent(String),
    /// The relay refused us, not the recipient (our login, our sender, DATA itself):
    /// retried like a 4xx, logged at error level and counted, never a bounce.
    RelayFault(String),
    /// This message will not go (we could not build or sign it, or the relay refused its
    /// content for good): FAILED, without touching the contact.
    Failed(String),
}
