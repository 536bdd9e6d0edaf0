//! Why a command or the server could not run: a sentence for the person at the
//! terminal, or what was being done and the error underneath (printed with its causes).

use std::error::Error;

use mailroom_actors::Error as EngineError;

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Says it all: a setting to change, a server to stop first.
    #[error("{0}")]
    Said(String),
    #[error("{context}")]
    Caused {
        context: String,
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
}

impl Failure {
    pub fn said(message: impl Into<String>) -> Self {
        Failure::Said(message.into())
    }

    pub fn caused(context: impl Into<String>, source: impl Error + Send + Sync + 'static) -> Self {
        Failure::Caused {
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// An engine error, in words for a person where the engine's own are not enough.
    pub fn engine(e: EngineError) -> Self {
        match e {
            EngineError::Locked { path } => Failure::said(format!(
                "{} {path} is in use by another process that does not answer \
                 on its control socket (a server with control.enabled = false, or an older \
                 mailroom?). Stop it first, or use the /admin API while it runs.",
                if path.starts_with("postgresql://") {
                    "the PostgreSQL store"
                } else {
                    "the data directory"
                }
            )),
            EngineError::NotFound(r) => Failure::said(format!("{r} not found")),
            // The engine's suggestion too: on the command line it is the only place to
            // learn which setting a limit is (`limits.max_domains`).
            EngineError::Conflict {
                message,
                suggestion: Some(s),
            } => Failure::said(format!("{message}. {s}")),
            EngineError::Conflict { message, .. } => Failure::said(message),
            EngineError::Validation(errors) => Failure::said(
                errors
                    .iter()
                    .map(|f| format!("{}: {}", f.field, f.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            other => Failure::caused("the engine", other),
        }
    }

    /// The whole story on one line: `flushing the store: storage error: ...: No space left`.
    pub fn explain(&self) -> String {
        mailroom_actors::error::chain(self)
    }
}
