//! Where renders run: on tokio's blocking threads, at most `threads` at once, never on
//! an actor's thread. A render is bounded (see `budget`), but even a bounded render of a
//! hundred recipients can take milliseconds, and an actor's arbiter hosts other
//! projects whose requests must not wait behind it.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

#[derive(Clone)]
pub struct RenderPool {
    permits: Arc<Semaphore>,
    limits: super::Limits,
}

impl RenderPool {
    pub fn new(threads: usize, limits: super::Limits) -> Self {
        RenderPool {
            permits: Arc::new(Semaphore::new(threads.max(1))),
            limits,
        }
    }

    /// Runs `work` on a blocking thread once a slot is free.
    pub async fn run<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let _slot = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Internal("the render pool is closed".into()))?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| Error::Internal(format!("a render failed: {e}")))
    }

    /// Compiles tenant text on the pool: a parse is bounded, but not free.
    pub async fn compile(&self, subject: String, body: String) -> Result<super::Compiled> {
        self.compile_with_text(subject, body, None).await
    }

    /// `compile`, with a text part.
    pub async fn compile_with_text(
        &self,
        subject: String,
        body: String,
        text: Option<String>,
    ) -> Result<super::Compiled> {
        let limits = self.limits;
        self.run(move || limits.compile_with_text(&subject, &body, text.as_deref()))
            .await?
    }
}
