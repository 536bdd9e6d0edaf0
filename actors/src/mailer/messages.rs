//! Messages of the mailer pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use actix::Message;

use super::DkimParams;
use crate::cluster::ownership::Ownership;
use crate::model::{OutboundEmail, ProjectId};

/// Send one email now.
#[derive(Debug, Message)]
#[rtype(result = "Delivery")]
pub struct Deliver {
    pub email: OutboundEmail,
    /// Always given: mail is never sent unsigned (see `DkimLookup`).
    pub dkim: DkimParams,
    /// Asked right before the SMTP transaction: the wait for a connection (a slow relay,
    /// a full pool) may outlast the lease that the dispatcher saw.
    pub owner: Owner,
}

/// Whether this node still owns one email's project, asked as its SMTP transaction is
/// about to begin; it also remembers whether the transaction began.
#[derive(Clone)]
pub struct Owner {
    ownership: Arc<Ownership>,
    project: ProjectId,
    began: Arc<AtomicBool>,
}

impl Owner {
    pub fn new(ownership: Arc<Ownership>, project: ProjectId) -> Owner {
        Owner {
            ownership,
            project,
            began: Arc::default(),
        }
    }

    /// Whether the email may go out now (`Ownership::owns`); when it may, the
    /// transaction counts as begun from here on.
    pub fn begin(&self) -> bool {
        let owns = self.ownership.owns(self.project);
        if owns {
            self.began.store(true, Ordering::Release);
        }
        owns
    }

    /// Whether the relay may have been given the email: a mailer that fails after this
    /// must not let it be sent again.
    pub fn began(&self) -> bool {
        self.began.load(Ordering::Acquire)
    }

    /// Nothing of the email reached the relay after all (a pooled connection failed
    /// at MAIL FROM): a panic in the fresh try must not count it as maybe sent.
    pub fn not_begun(&self) {
        self.began.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
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
    /// The project was no longer this node's when the transaction was to begin: nothing
    /// went to the relay and no outcome is written; the email stays in the durable
    /// outbox for the project's new owner.
    NotOwned,
}
