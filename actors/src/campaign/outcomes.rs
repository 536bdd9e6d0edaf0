//! What a campaign makes of its emails once they are queued: each final outcome and
//! each first open or click counts in its stats, the outcome of its last email waiting
//! ends it (`end`), a cancel calls off the retry of an email still in an attempt, and
//! an email its contact's erasure cancelled counts as cancelled.
//! The email feature reaches this through the core's hooks (`project::hooks::EmailWatch`,
//! wired in `crate::wiring`), so it names no campaign.

use std::collections::HashMap;

use super::{end, stats, Campaign, CampaignStatus};
use crate::error::Result;
use crate::model::{CampaignId, EmailStatus, Engagement, Hit, OutboundEmail, ProjectId, Timestamp};
use crate::project::hooks::EmailWatch;
use crate::store::{keys, Batch, Store};

pub struct CampaignEmails;

impl EmailWatch for CampaignEmails {
    fn called_off(&self, store: &dyn Store, p: ProjectId, email: &OutboundEmail) -> Result<bool> {
        let Some(c) = email.campaign_id else {
            return Ok(false);
        };
        Ok(match store.get(&keys::campaign(p, c))? {
            Some(bytes) => Campaign::decode(&bytes)?.status == CampaignStatus::Cancelled,
            None => false,
        })
    }

    fn after_outcome(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        email: &OutboundEmail,
        called_off: bool,
        now: Timestamp,
    ) -> Result<()> {
        let Some(c) = email.campaign_id else {
            return Ok(());
        };
        // It waits in the campaign's queue no more.
        batch.delete(keys::campaign_queued_email(p, c, email.id));
        let status = email.status;
        let stats = stats::update(store, batch, p, c, |s| {
            s.queued = s.queued.saturating_sub(1);
            match status {
                EmailStatus::Sent => s.delivered += 1,
                EmailStatus::Bounced => s.bounced += 1,
                _ if called_off => s.cancelled += 1,
                _ => s.failed += 1,
            }
        })?;
        end::after_outcome(store, batch, p, c, &stats, now)
    }

    fn after_cancelled(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        emails: &[OutboundEmail],
        now: Timestamp,
    ) -> Result<()> {
        let mut cancelled: HashMap<CampaignId, u64> = HashMap::new();
        for email in emails {
            if let Some(c) = email.campaign_id {
                batch.delete(keys::campaign_queued_email(p, c, email.id));
                *cancelled.entry(c).or_default() += 1;
            }
        }
        for (c, n) in cancelled {
            let stats = stats::update(store, batch, p, c, |s| {
                s.queued = s.queued.saturating_sub(n);
                s.cancelled += n;
            })?;
            end::after_outcome(store, batch, p, c, &stats, now)?;
        }
        Ok(())
    }

    fn after_first_hit(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        p: ProjectId,
        engagement: &Engagement,
        hit: Hit,
    ) -> Result<()> {
        let Some(c) = engagement.campaign_id else {
            return Ok(());
        };
        stats::update(store, batch, p, c, |s| match hit {
            Hit::Open => s.opened += 1,
            Hit::Click => s.clicked += 1,
        })?;
        Ok(())
    }
}
