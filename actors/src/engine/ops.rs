//! What an operator watches and does: the engine's counters and gauges for `/metrics`,
//! and the nudges after the test clock moves.

pub use crate::mailer::outbox::Depth as OutboxDepth;
pub use crate::metrics::{ExecutionMove, Metrics, RelayFault};
pub use crate::retention::Kind as RetentionKind;
pub use crate::shutdown::Drain;

use super::Engine;
use crate::error::Result;
use crate::model::ProjectId;

/// `engine.ops()`.
pub struct Ops<'e>(pub(super) &'e Engine);

impl<'e> Ops<'e> {
    /// The engine's counters.
    pub fn metrics(&self) -> &'e Metrics {
        self.0.registry.metrics()
    }

    /// Messages waiting in each project actor's mailbox.
    pub fn mailbox_depths(&self) -> Vec<(ProjectId, usize)> {
        self.0.registry.mailbox_depths()
    }

    /// Durable timers not yet fired.
    pub fn timers_pending(&self) -> usize {
        self.0.registry.timers().len()
    }

    /// Groups of writes the store has applied.
    pub fn batches_applied(&self) -> u64 {
        self.0.store.batches_applied()
    }

    /// The outbox, counted from its keys (blocking: a scan).
    pub fn outbox_depth(&self) -> Result<OutboxDepth> {
        crate::mailer::outbox::depth(&*self.0.store)
    }

    /// Webhook deliveries waiting: retries in the queue, and first deliveries the loop
    /// saw waiting (blocking: a scan).
    pub fn webhook_backlog(&self) -> Result<u64> {
        let queued = crate::webhooks::deliver::backlog(&*self.0.store)?;
        Ok(queued + self.0.registry.wakeups().webhooks().waiting())
    }

    /// How many projects are over each pause rate: (bounce, complaint) (blocking).
    pub fn over_rates(&self, bounce: f64, complaint: f64) -> Result<(u64, u64)> {
        crate::feedback::stats::over_rates(&self.0.registry, bounce, complaint)
    }

    /// Wakes the dispatcher, the timers and the retention purge, so that what a move of
    /// the clock made due happens now.
    pub fn wake(&self) {
        self.0.registry.outbox_signal().notify_one();
        self.0.registry.timers().wake();
        self.0.registry.retention_signal().notify_one();
    }
}

/// How long one core takes for `n` DKIM signatures of `message` from `domain` with the
/// engine's own signer and a new key: the floor of a campaign email, which the bench
/// measures its emails against.
pub fn time_dkim_signatures(message: &[u8], domain: &str, n: usize) -> Result<std::time::Duration> {
    use crate::mailer::{mime, DkimParams};
    let key = crate::domain::dkim::generate()?;
    let signer = mime::signer(&DkimParams {
        domain: domain.into(),
        selector: key.selector.clone(),
        private_key_pem: key.private_key_pem.clone(),
        aligned_return_path: None,
    })
    .map_err(|e| crate::error::Error::Internal(format!("a DKIM signer: {e}")))?;
    let started = std::time::Instant::now();
    for _ in 0..n {
        mime::sign(message.to_vec(), &signer)
            .map_err(|e| crate::error::Error::Internal(format!("a DKIM signature: {e}")))?;
    }
    Ok(started.elapsed())
}
