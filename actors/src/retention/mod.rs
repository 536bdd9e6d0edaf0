//! Retention: records older than their kind's configured age are removed in the
//! background, so a project's store does not grow for ever. Aggregates (campaign stats,
//! `GET /events/names`, contacts) count what they counted and stay.
//!
//! The purge runs every `interval`, and at once when the operator moves the injected
//! clock (`wake`). It works in slices: each slice is one message to the project's actor
//! that touches at most `slice_keys` keys in one batch, so a project's writes wait for
//! one slice at most, never for a whole purge.

//!
//! Each feature walks its own keys (`event::retention`, `email::retention`,
//! `workflow::retention` and `entry_retention`, `campaign::audience_retention` and
//! `unsubscribe_retention`, `contact::import_retention`, `webhooks::records::purge`):
//! this module only decides when, and runs their slices through the project's actor.

mod due;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::Result;
use crate::model::{ProjectId, Timestamp};
use crate::project::apply::Apply;
use crate::project::write::WriteCtx;
use crate::project::Registry;
use crate::store::{keys, Store};

use crate::campaign::{audience_retention as audiences, unsubscribe_retention as unsubscribes};
use crate::contact::import_retention as imports;
use crate::email::retention::{self as emails, Cut};
use crate::event::retention as events;
use crate::store::Slice;
use crate::workflow::{entry_retention as entries, retention as executions};

const DAY_MS: i64 = 24 * 3_600_000;

/// How long each kind of record is kept, in whole days (hours for idempotency keys);
/// `None` keeps it for ever.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub email_content_days: Option<u32>,
    pub emails_days: Option<u32>,
    pub events_days: Option<u32>,
    pub executions_days: Option<u32>,
    /// Event webhook deliveries that are over (delivered, failed, cancelled), by when
    /// they were made.
    pub webhook_deliveries_days: Option<u32>,
    /// Unused here (records carry their own expiry); `idempotency_ttl_ms` gives it.
    pub idempotency_hours: Option<u32>,
    /// The most keys one slice walks or removes.
    pub slice_keys: usize,
    /// How often the purge runs when nothing wakes it.
    pub interval: Duration,
}

impl Retention {
    /// How long an `Idempotency-Key` replays its answer.
    pub fn idempotency_ttl_ms(&self) -> i64 {
        self.idempotency_hours
            .map_or(i64::MAX, |h| i64::from(h) * 3_600_000)
    }
}

/// What was created (or ended) before this time is past `days`.
fn cutoff(days: Option<u32>, now: Timestamp) -> Option<i64> {
    days.map(|d| now.millis().saturating_sub(i64::from(d) * DAY_MS))
}

/// What retention removes, the label of `mailroom_retention_removed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Events,
    Emails,
    EmailContents,
    Executions,
    IdempotencyKeys,
    CampaignAudiences,
    Imports,
    CampaignUnsubscribes,
    EntryWindows,
    WebhookDeliveries,
}

impl Kind {
    pub const ALL: [Kind; crate::metrics::RETENTION_KINDS] = [
        Kind::Events,
        Kind::Emails,
        Kind::EmailContents,
        Kind::Executions,
        Kind::IdempotencyKeys,
        Kind::CampaignAudiences,
        Kind::Imports,
        Kind::CampaignUnsubscribes,
        Kind::EntryWindows,
        Kind::WebhookDeliveries,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Events => "events",
            Kind::Emails => "emails",
            Kind::EmailContents => "email_contents",
            Kind::Executions => "executions",
            Kind::IdempotencyKeys => "idempotency_keys",
            Kind::CampaignAudiences => "campaign_audience_chunks",
            Kind::Imports => "contact_imports",
            Kind::CampaignUnsubscribes => "campaign_unsubscribes",
            Kind::EntryWindows => "workflow_entry_windows",
            Kind::WebhookDeliveries => "webhook_deliveries",
        }
    }
}

/// The background purge. Rings `wake` to run it now (the clock moved).
pub struct Purger {
    registry: Registry,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: Retention,
    wake: Arc<tokio::sync::Notify>,
    /// Per project, where the last content walk stopped: the emails before it are done.
    content_cursors: std::collections::HashMap<ProjectId, Vec<u8>>,
}

impl Purger {
    /// Starts the purge on the current actix System.
    pub fn start(
        registry: Registry,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: Retention,
    ) {
        let wake = registry.retention_signal();
        let purger = Purger {
            registry,
            store,
            clock,
            config,
            wake,
            content_cursors: Default::default(),
        };
        actix::spawn(purger.run());
    }

    async fn run(mut self) {
        loop {
            self.run_once().await;
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }

    /// One purge of every project; totals in the log.
    pub async fn run_once(&mut self) {
        let started = Instant::now();
        let mut totals = [0u64; crate::metrics::RETENTION_KINDS];
        let prefix = keys::PROJECTS;
        let projects: Vec<ProjectId> = self
            .store
            .scan(prefix, None, false)
            .filter_map(|kv| kv.ok().and_then(|(k, _)| keys::id_after(&k, prefix)))
            // Another node purges its own projects.
            .filter(|p| self.registry.ownership().owns(*p))
            .collect();
        for p in projects {
            if let Err(e) = self.project(p, &mut totals).await {
                tracing::warn!(project = %p, error = %e, "retention purge of a project stopped; the next run goes on");
            }
        }
        for kind in Kind::ALL {
            self.registry
                .metrics()
                .removed(kind as usize, totals[kind as usize]);
        }
        if totals.iter().any(|n| *n > 0) {
            let [events, emails, contents, executions, idempotency, audiences, imports, unsubscribes, windows, deliveries] =
                totals;
            tracing::info!(
                events,
                emails,
                email_contents = contents,
                executions,
                idempotency_keys = idempotency,
                campaign_audience_chunks = audiences,
                contact_imports = imports,
                campaign_unsubscribes = unsubscribes,
                workflow_entry_windows = windows,
                webhook_deliveries = deliveries,
                duration_ms = started.elapsed().as_millis() as u64,
                "retention purge: removed {events} events, {emails} emails, {contents} email contents, \
                 {executions} executions, {idempotency} idempotency keys, {audiences} campaign audience chunks, \
                 {imports} contact imports, {unsubscribes} campaign unsubscribe markers, \
                 {windows} workflow entry windows, {deliveries} webhook deliveries in {} ms",
                started.elapsed().as_millis()
            );
        }
    }

    async fn project(
        &mut self,
        p: ProjectId,
        totals: &mut [u64; crate::metrics::RETENTION_KINDS],
    ) -> Result<()> {
        let c = self.config;
        let now = Timestamp::from(self.clock.now());
        let max = c.slice_keys.max(1);
        let store = &*self.store;
        let events_before = cutoff(c.events_days, now).map(Timestamp::from);
        if let Some(before) = events_before.filter(|b| events::due(store, p, *b).unwrap_or(true)) {
            totals[Kind::Events as usize] += self
                .slices(p, None, move |ctx, _| {
                    let n = events::purge(ctx.store, ctx.project, before, max)?;
                    Ok(counted(n, max))
                })
                .await?
                .0;
        }
        let records = cutoff(c.emails_days, now);
        if let Some(before) = records.filter(|b| emails::due(store, p, *b, None).unwrap_or(true)) {
            totals[Kind::Emails as usize] += self
                .slices(p, None, move |ctx, after| {
                    emails::purge(ctx.store, ctx.project, Cut::Record, before, after, max)
                })
                .await?
                .0;
        }
        // Content older than the records' retention went with the records.
        let content =
            cutoff(c.email_content_days, now).filter(|at| records.is_none_or(|r| at > &r));
        let from = self.content_cursors.get(&p).cloned();
        let content =
            content.filter(|b| emails::due(store, p, *b, from.as_deref()).unwrap_or(true));
        if let Some(before) = content {
            let (n, last) = self
                .slices(p, from, move |ctx, after| {
                    emails::purge(ctx.store, ctx.project, Cut::Content, before, after, max)
                })
                .await?;
            totals[Kind::EmailContents as usize] += n;
            if let Some(last) = last {
                self.content_cursors.insert(p, last);
            }
        }
        let executions_before = cutoff(c.executions_days, now);
        if let Some(before) =
            executions_before.filter(|b| executions::due(store, p, *b).unwrap_or(true))
        {
            totals[Kind::Executions as usize] += self
                .slices(p, None, move |ctx, after| {
                    executions::purge(ctx.store, ctx.project, before, after, max)
                })
                .await?
                .0;
        }
        if due::idempotency(store, p, now).unwrap_or(true) {
            totals[Kind::IdempotencyKeys as usize] += self
                .slices(p, None, move |ctx, _| {
                    let n = crate::idempotency::sweep(ctx.store, ctx.project, ctx.now, max)?;
                    Ok(counted(n, max))
                })
                .await?
                .0;
        }
        if let Some(before) = records.filter(|_| audiences::due(store, p).unwrap_or(true)) {
            totals[Kind::CampaignAudiences as usize] += self
                .slices(p, None, move |ctx, after| {
                    audiences::purge(ctx.store, ctx.project, before, after, max)
                })
                .await?
                .0;
        }
        if let Some(before) = records.filter(|_| unsubscribes::due(store, p).unwrap_or(true)) {
            totals[Kind::CampaignUnsubscribes as usize] += self
                .slices(p, None, move |ctx, after| {
                    unsubscribes::purge(ctx.store, ctx.project, before, after, max)
                })
                .await?
                .0;
        }
        // A window record past its day counts as none whatever the settings: always.
        if entries::due(store, p).unwrap_or(true) {
            totals[Kind::EntryWindows as usize] += self
                .slices(p, None, move |ctx, after| {
                    entries::purge(ctx.store, ctx.project, ctx.now.millis(), after, max)
                })
                .await?
                .0;
        }
        if let Some(before) = records.filter(|_| imports::due(store, p).unwrap_or(true)) {
            totals[Kind::Imports as usize] += self
                .slices(p, None, move |ctx, after| {
                    imports::purge(ctx.store, ctx.project, before, after, max)
                })
                .await?
                .0;
        }
        if let Some(before) = cutoff(c.webhook_deliveries_days, now) {
            totals[Kind::WebhookDeliveries as usize] += self
                .slices(p, None, move |ctx, after| {
                    let (removed, next) = crate::webhooks::records::purge(
                        ctx.store,
                        ctx.project,
                        before,
                        after,
                        max,
                    )?;
                    Ok(Slice {
                        removed,
                        next,
                        ..Slice::default()
                    })
                })
                .await?
                .0;
        }
        Ok(())
    }

    /// Runs `slice` on the project's actor until it is done, one message a slice, and
    /// answers how many records went and the last resume point the walk handed back.
    async fn slices<F>(
        &self,
        p: ProjectId,
        from: Option<Vec<u8>>,
        slice: F,
    ) -> Result<(u64, Option<Vec<u8>>)>
    where
        F: Fn(&WriteCtx, Option<&[u8]>) -> Result<Slice> + Clone + Send + 'static,
    {
        let mut removed = 0u64;
        let mut after = from;
        let mut last = None;
        loop {
            let (run, from) = (slice.clone(), after.clone());
            let done = self
                .registry
                .send(p, Apply::applied(move |ctx, _| run(ctx, from.as_deref())))
                .await?;
            removed += done.removed as u64;
            if done.last.is_some() {
                last = done.last;
            }
            match done.next {
                Some(next) => after = Some(next),
                None => return Ok((removed, last)),
            }
            // Between slices the actor serves the requests that queued meanwhile.
            tokio::task::yield_now().await;
        }
    }
}

/// A slice of a kind without a walk (its records go oldest first): another slice is
/// needed only when this one was full.
fn counted(n: usize, max: usize) -> Slice {
    Slice {
        removed: n,
        next: (n >= max).then(Vec::new),
        last: None,
    }
}

#[cfg(test)]
mod tests;
