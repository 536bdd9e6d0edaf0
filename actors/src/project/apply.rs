//! One message for the writes of any feature: a function run in the project's actor
//! with the write context, so a feature adds functions, not actor handlers.

use actix::Message;

use super::counters::ProjectCounts;
use super::write::WriteCtx;
use crate::error::Result;

type Run<T> = Box<dyn FnOnce(&WriteCtx, &mut ProjectCounts) -> Result<T> + Send>;

pub struct Apply<T> {
    pub(crate) run: Run<T>,
    /// Whether the answer waits until the write is durable (an acknowledged write);
    /// bookkeeping a crash may lose (a delivery outcome, an open) need not.
    pub(crate) durable: bool,
}

impl<T> Apply<T> {
    /// A write answered once durable.
    pub fn durable(
        run: impl FnOnce(&WriteCtx, &mut ProjectCounts) -> Result<T> + Send + 'static,
    ) -> Self {
        Apply {
            run: Box::new(run),
            durable: true,
        }
    }

    /// A write answered once applied (readable), flushed soon after.
    pub fn applied(
        run: impl FnOnce(&WriteCtx, &mut ProjectCounts) -> Result<T> + Send + 'static,
    ) -> Self {
        Apply {
            run: Box::new(run),
            durable: false,
        }
    }
}

impl<T: 'static> Message for Apply<T> {
    type Result = Result<T>;
}
