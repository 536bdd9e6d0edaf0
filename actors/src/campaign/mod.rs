//! Campaigns: their records (`model`, written by `records`, counted by `stats`, ended by
//! `end`, told of its emails' outcomes and hits by `outcomes`), the audience, the runner that queues a sending campaign in batches, the use
//! cases the HTTP edge calls (`actions`), and the unsubscribe link's page and writes.
//! The signed links themselves are `crate::links`.

pub mod actions;
pub mod audience;
pub(crate) mod audience_retention;
pub mod end;
pub(crate) mod ended_retention;
pub(crate) mod erasure;
pub mod model;
pub mod outcomes;
pub mod records;
pub mod runner;
pub mod stats;
pub mod unsubscribe;
pub(crate) mod unsubscribe_retention;

pub use model::{AudienceKind, Campaign, CampaignStats, CampaignStatus, NewCampaign, PauseRule};
pub use runner::{Campaigns, RunnerConfig};
