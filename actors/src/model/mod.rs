//! Domain types. Each one can only hold a valid value: the HTTP edge parses raw
//! input into them, and the rest of the engine trusts them.

pub mod contact;
pub mod data;
pub mod email;
pub mod event;
// The ids and the timestamp sit below the model (and below the error table, which
// names a project), re-exported here so the model stays their one address.
pub use crate::id;
pub mod outbound;
pub mod page;
pub(crate) mod pick;
pub mod project;
pub mod template;
pub use crate::timestamp as time;
pub mod workflow;

pub use contact::{Contact, ContactRef};
pub use data::{DataMap, DataPatch};
pub use email::{EmailAddress, EmailError, Flaw};
pub use event::{Event, EventSource, EventStats};
pub use id::{
    CampaignId, ContactId, DeliveryId, DomainId, EmailId, EventId, ExecutionId, ImportId,
    ProjectId, SegmentId, TemplateId, WebhookId, WorkflowId,
};
pub use outbound::{Attachment, EmailStatus, Engagement, Hit, Mailbox, OutboundEmail, Recipient};
pub use page::{Page, PageRequest};
pub use project::{ApiKey, KeyKind, Project};
pub use template::{NewTemplate, Template, TemplateKind};
pub use time::Timestamp;
pub use workflow::{
    ExecStatus, Execution, HistoryEntry, NewWorkflow, Step, StepKind, Wait, Workflow,
};
