//! The settings each part of the engine is started with (`EngineConfig` holds them),
//! named in one place for the server that fills them from its config file.

pub use super::{EngineConfig, LinksConfig, StartError, WorkflowsConfig};
pub use crate::campaign::{PauseRule, RunnerConfig};
pub use crate::dns::DnsConfig;
pub use crate::domain::RecordPolicy;
pub use crate::feedback::receiver::{tls_acceptor, ReceiverConfig, TlsAcceptor};
pub use crate::feedback::FeedbackConfig;
pub use crate::mailer::{DispatcherConfig, SmtpSecurity, TransportConfig};
pub use crate::project::{RegistryConfig, TenantLimits};
pub use crate::render::Limits as RenderLimits;
pub use crate::retention::Retention;
pub use crate::webhooks::WebhookConfig;
pub use crate::workflow::records::Bounds as WorkflowBounds;
pub use crate::workflow::ExecutorConfig;
