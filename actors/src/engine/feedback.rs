//! What comes back: delivery reports from the providers' callbacks, applied to the
//! emails and contacts they name, and the SMTP server that takes reports mailed to the
//! return path.

pub use crate::dns::Resolver;
pub use crate::feedback::providers::{self, CallbackError};
pub use crate::feedback::ses::{self, SnsType};
pub use crate::feedback::{Applied, FeedbackConfig, Report};
pub use crate::workflow::webhook::roots_from_pem;
pub use crate::workflow::WebhookClient;

use tokio::net::TcpListener;

use super::{off_thread, Engine};
use crate::error::Result;
use crate::feedback::{effects, receiver};

/// `engine.feedback()`.
pub struct Feedback<'e>(pub(super) &'e Engine);

impl Feedback<'_> {
    /// Applies one report to every email or contact it names here (by our Message-ID,
    /// else by recipient): done anywhere is done, a duplicate everywhere a duplicate.
    pub async fn apply(&self, config: &FeedbackConfig, report: Report) -> Result<Applied> {
        let registry = self.0.registry.clone();
        let probe = report.clone();
        let found = off_thread(move || effects::locate(&registry, &probe)).await?;
        let mut applied = Applied::Unmatched;
        for (p, email) in found {
            let one = effects::apply(&self.0.registry, config, p, email, report.clone()).await?;
            applied = match (applied, one) {
                (Applied::Done, _) | (_, Applied::Done) => Applied::Done,
                (Applied::Duplicate, _) | (_, Applied::Duplicate) => Applied::Duplicate,
                _ => Applied::Unmatched,
            };
        }
        Ok(applied)
    }

    /// Starts the SMTP server for reports mailed to the return path on `listener`;
    /// false when no return path is configured (nothing started).
    pub fn start_receiver(
        &self,
        listener: TcpListener,
        feedback: FeedbackConfig,
        config: receiver::ReceiverConfig,
    ) -> bool {
        let Some(rp) = self.0.return_path.clone() else {
            return false;
        };
        receiver::start(listener, self.0.registry.clone(), rp, feedback, config);
        true
    }
}
