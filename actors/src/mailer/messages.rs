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
    /// 5xx or a message that cannot be built: do not try again.
    Permanent(String),
}
