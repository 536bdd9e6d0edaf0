//! The runner of a SENDING campaign: fixes its audience (once), then renders and queues
//! its emails batch by batch, each batch one visit of the project's actor, so a
//! 100,000-recipient campaign never sits in memory whole and a `/v1/track` of the same
//! project waits at most one batch. Queueing pauses while `queue_ahead` of the
//! campaign's emails wait in the outbox, so the outbox stays small and a cancel has
//! something to drop.
//!
//! The runners are a pool of supervised actors (`campaigns.runners`); each campaign
//! goes to one of them by its id. A runner resumes every campaign of its own that was
//! SENDING when it starts (at start-up, and after a panic restarted it), from its
//! durable cursor; a scheduled one starts when its timer fires (`fire`). A clean stop parks a
//! runner between two batches (see `shutdown`): its cursor is durable there.
//!
//! In a cluster a runner runs only the campaigns of projects this node owns: it asks
//! `owns(p)` before each batch and stops when the project was handed over (the next
//! owner resumes the campaign from the same durable cursor, `resume_project`).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actix::{
    Actor, ActorContext, ActorFutureExt, Addr, AsyncContext, Context, Handler, Message, Supervised,
    Supervisor, WrapFuture,
};
use serde_json::Map;

use super::audience;
use super::{end as campaign_end, stats as campaign_stats};
use crate::campaign::records::{self as campaigns, QueueBatch};
use crate::campaign::{Campaign, CampaignStatus};
use crate::email::sending::{self, Marketing, Recipient, Rendered, SendSpec};
use crate::error::{Error, Result};
use crate::model::{CampaignId, EmailId, Mailbox, ProjectId};
use crate::project::apply::Apply;
use crate::project::Registry;
use crate::render::Compiled;
use crate::scheduler::Timer;
use crate::shutdown::Work;
use crate::store::keys;

#[derive(Debug, Clone, Copy)]
pub struct RunnerConfig {
    /// Recipients rendered and queued per actor visit.
    pub batch_size: usize,
    /// The most of one campaign's emails waiting in the outbox.
    pub queue_ahead: u64,
    /// How often a sending campaign logs its progress.
    pub progress_every: Duration,
    /// Supervised runner actors; each runs the campaigns that hash to it.
    pub runners: usize,
    /// When a campaign's own bounce or complaint rate stops it.
    pub pause: crate::campaign::PauseRule,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            batch_size: 500,
            queue_ahead: 5_000,
            progress_every: Duration::from_secs(5),
            runners: 2,
            pause: Default::default(),
        }
    }
}

/// Contact ids per stored audience chunk, and chunks per write while fixing it.
const CHUNK: usize = 1_000;
const CHUNKS_PER_WRITE: usize = 20;
/// Rendered bytes in one batch at most: large bodies make smaller batches, so one
/// actor visit (and one store batch) stays a few megabytes.
const BATCH_BYTES: usize = 8 << 20;
/// Failures in a row after which a campaign is given up.
const MAX_FAILURES: u32 = 20;
/// How often a campaign waiting for the outbox to drain looks again.
const PAUSE: Duration = Duration::from_millis(250);
/// How often a campaign that has queued everyone looks at its stats (to log them; its
/// end comes with its last email's outcome, not from this look).
const DRAIN_POLL: Duration = Duration::from_secs(1);
/// The longest a runner that panicked waits before it resumes its campaigns.
const PANIC_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// One campaign runner: a supervised actor that runs the SENDING campaigns that hash to
/// it, each as a future of its own. A campaign whose run panics stops the actor; its
/// supervisor restarts it, and the restarted runner resumes every campaign of its own
/// from the store (their cursors are durable at each batch), after a backoff that
/// doubles with each panic in a row.
struct Runner {
    campaigns: Arc<Campaigns>,
    index: usize,
    running: HashSet<CampaignId>,
    /// Panics since a campaign last ran to its end.
    panics: u32,
}

#[derive(Message)]
#[rtype(result = "()")]
struct Run {
    p: ProjectId,
    id: CampaignId,
}

/// Start whatever SENDING campaign of this runner's is not running.
#[derive(Message)]
#[rtype(result = "()")]
struct Resume;

impl Actor for Runner {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let wait = crate::backoff::doubling(Duration::from_secs(1), self.panics, PANIC_BACKOFF_MAX);
        ctx.run_later(wait, |act, ctx| act.resume(ctx));
    }
}

impl Supervised for Runner {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(
            runner = self.index,
            campaigns = self.running.len(),
            "a campaign runner restarts after a panic; its campaigns resume from the store"
        );
        // Restarting dropped the campaigns' futures.
        self.running.clear();
    }
}

impl Runner {
    fn resume(&mut self, ctx: &mut Context<Self>) {
        match self.campaigns.sending_of(self.index) {
            Ok(found) => {
                for (p, id) in found {
                    if self.begin(p, id, ctx) {
                        self.campaigns.log_resume(p, id);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "looking for sending campaigns"),
        }
    }

    /// Runs a campaign unless it runs already; answers whether it started it.
    fn begin(&mut self, p: ProjectId, id: CampaignId, ctx: &mut Context<Self>) -> bool {
        if !self.running.insert(id) {
            return false;
        }
        let me = self.campaigns.clone();
        let run = async move {
            let run = std::panic::AssertUnwindSafe(me.run(p, id));
            futures_util::FutureExt::catch_unwind(run).await.is_ok()
        };
        ctx.spawn(run.into_actor(self).map(move |ended, act, ctx| {
            if ended {
                act.running.remove(&id);
                act.panics = 0;
            } else {
                tracing::error!(project = %p, campaign = %id, "a campaign runner panicked; it restarts");
                act.panics = act.panics.saturating_add(1);
                ctx.stop();
            }
        }));
        true
    }
}

impl Handler<Run> for Runner {
    type Result = ();

    fn handle(&mut self, msg: Run, ctx: &mut Self::Context) {
        self.begin(msg.p, msg.id, ctx);
    }
}

impl Handler<Resume> for Runner {
    type Result = ();

    fn handle(&mut self, _msg: Resume, ctx: &mut Self::Context) {
        self.resume(ctx);
    }
}

pub struct Campaigns {
    registry: Registry,
    config: RunnerConfig,
    /// The runner actors; a campaign always goes to the same one (`runner_of`). Held
    /// here also because a supervisor restarts its actor only while an address lives.
    runners: OnceLock<Vec<Addr<Runner>>>,
}

impl Campaigns {
    /// Starts `config.runners` supervised runners, each resuming the SENDING campaigns
    /// that are its own from the store. Must be called inside a running actix System.
    pub fn new(registry: Registry, config: RunnerConfig) -> Arc<Self> {
        let me = Arc::new(Campaigns {
            registry,
            config,
            runners: OnceLock::new(),
        });
        let runners = (0..config.runners.max(1))
            .map(|index| {
                let campaigns = me.clone();
                Supervisor::start(move |_| Runner {
                    campaigns,
                    index,
                    running: HashSet::new(),
                    panics: 0,
                })
            })
            .collect();
        let _ = me.runners.set(runners);
        let weak = Arc::downgrade(&me);
        me.registry.on_acquire(Arc::new(move |_, p| {
            if let Some(me) = weak.upgrade() {
                me.resume_project(p);
            }
        }));
        me
    }

    /// Starts every SENDING campaign of project `p` (a project this node just took).
    pub fn resume_project(&self, p: ProjectId) {
        let prefix = keys::with_id(keys::SENDING_CAMPAIGNS, p.as_bytes());
        for kv in self.registry.store().scan(&prefix, None, false) {
            match kv {
                Ok((k, _)) => {
                    if let Some((p, id)) = keys::parse_sending_campaign(&k) {
                        self.log_resume(p, id);
                        self.start(p, id);
                    }
                }
                Err(e) => {
                    tracing::warn!(project = %p, error = %e, "looking for sending campaigns");
                    return;
                }
            }
        }
    }

    fn runners(&self) -> &[Addr<Runner>] {
        self.runners.get().map_or(&[], Vec::as_slice)
    }

    /// The runner that runs campaign `id`.
    fn runner_of(&self, id: CampaignId) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        (h.finish() as usize) % self.config.runners.max(1)
    }

    /// Asks every runner to start any SENDING campaign of its own it does not run.
    pub fn resume(&self) {
        for r in self.runners() {
            r.do_send(Resume);
        }
    }

    /// The SENDING campaigns of runner `index` whose projects this node owns.
    fn sending_of(&self, index: usize) -> Result<Vec<(ProjectId, CampaignId)>> {
        let mut out = Vec::new();
        for kv in self
            .registry
            .store()
            .scan(keys::SENDING_CAMPAIGNS, None, false)
        {
            let (k, _) = kv?;
            if let Some((p, id)) = keys::parse_sending_campaign(&k) {
                if self.runner_of(id) == index && self.registry.ownership().owns(p) {
                    out.push((p, id));
                }
            }
        }
        Ok(out)
    }

    /// Where a campaign picks up after a restart (or after its runner was lost).
    fn log_resume(&self, p: ProjectId, id: CampaignId) {
        let store = self.registry.store();
        let (Ok(Some(c)), Ok(s)) = (
            campaigns::load(&**store, p, id),
            campaign_stats::load(&**store, p, id),
        ) else {
            return;
        };
        tracing::info!(project = %p, campaign = %id, recipients = c.progress.total,
            not_yet_queued = c.progress.total.saturating_sub(c.progress.cursor),
            queued = s.queued, sent = s.sent(), failed = s.failed,
            "campaign resumes");
    }

    /// Campaigns SENDING now (for /metrics): a key each, so a short scan.
    pub fn sending_count(&self) -> Result<u64> {
        let mut n = 0;
        for kv in self
            .registry
            .store()
            .scan(keys::SENDING_CAMPAIGNS, None, false)
        {
            kv?;
            n += 1;
        }
        Ok(n)
    }

    /// Runs a SENDING campaign until it is SENT or stopped, on its runner (once: a
    /// second call while it runs does nothing).
    pub fn start(&self, p: ProjectId, id: CampaignId) {
        if let Some(r) = self.runners().get(self.runner_of(id)) {
            r.do_send(Run { p, id });
        }
    }

    /// A scheduled campaign's timer fell due.
    pub async fn fire(self: Arc<Self>, t: Timer) -> Result<()> {
        let started = self
            .registry
            .send(
                t.project,
                Apply::durable(move |ctx, _| campaigns::begin_scheduled(ctx, t)),
            )
            .await?;
        if started {
            if let Some(id) = keys::id_after::<CampaignId>(&t.target, b"") {
                tracing::info!(project = %t.project, campaign = %id, "scheduled campaign starts");
                self.start(t.project, id);
            }
        }
        Ok(())
    }

    /// Runs until SENT or stopped. A failure that may pass (a full mailbox, the store) is retried
    /// with backoff; one that will not (the segment is gone, the audience unreadable),
    /// or one that keeps coming back, ends the campaign as CANCELLED with the reason in
    /// the log, rather than a runner that retries for ever.
    async fn run(&self, p: ProjectId, id: CampaignId) {
        let mut backoff = Duration::from_millis(100);
        let mut failures = 0;
        loop {
            let e = match self.run_once(p, id).await {
                Ok(()) => return,
                Err(e) => e,
            };
            if self.registry.drain().is_stopping() || !self.owns(p, id, &e) {
                return;
            }
            failures += 1;
            let lasting = matches!(e, Error::NotFound(_) | Error::Validation(_));
            if lasting || failures >= MAX_FAILURES {
                let reason = e.to_string();
                let ended = self
                    .registry
                    .send(
                        p,
                        Apply::durable(move |ctx, _| campaigns::abandon(ctx, id, &reason)),
                    )
                    .await;
                if ended.is_ok() {
                    return;
                }
            }
            tracing::warn!(project = %p, campaign = %id, error = %e, failures, "campaign runner failed; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }

    /// Whether `p` is still this node's; logs the hand-over when it is not.
    fn owns(&self, p: ProjectId, id: CampaignId, e: &Error) -> bool {
        if self.registry.ownership().owns(p) && !matches!(e, Error::NotOwner { .. }) {
            return true;
        }
        tracing::info!(project = %p, campaign = %id, "the project moved to another node; the campaign goes on there");
        false
    }

    /// Every minute, starts a runner for any SENDING campaign without one (a start
    /// whose reply was lost, say). Runners already going are left alone.
    pub fn watch(self: &Arc<Self>) {
        let me = self.clone();
        actix::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                me.resume();
            }
        });
    }

    async fn run_once(&self, p: ProjectId, id: CampaignId) -> Result<()> {
        let registry = &self.registry;
        let store = registry.store().clone();
        let Some(mut c) = campaigns::load(&*store, p, id)?.filter(sending) else {
            return Ok(());
        };
        if !c.progress.audience_fixed {
            let Some(_fixing) = registry.drain().enter(Work::Campaign) else {
                return Ok(());
            };
            match self.fix_audience(p, &c).await? {
                Some(fixed) => c = fixed,
                None => return Ok(()),
            }
        }
        let mut log = Progress::new(self.config.progress_every);
        if c.progress.cursor >= c.progress.total {
            return self.drain(p, id, log).await;
        }
        let (subject, body) = (c.subject.clone(), c.body.clone());
        let content = Arc::new(registry.renders().compile(subject, body).await?);
        while sending(&c) && c.progress.cursor < c.progress.total {
            let Some(step) = registry.drain().enter(Work::Campaign) else {
                return Ok(());
            };
            if !registry.ownership().owns(p) {
                return Err(Error::NotOwner { project: p });
            }
            let stats = campaign_stats::load(&*store, p, id)?;
            log.maybe(p, &c, &stats);
            let baseline = campaigns::resumed_at(&*store, p, id)?;
            if let Some(reason) = self.config.pause.reason(&stats, &baseline) {
                registry
                    .send(
                        p,
                        Apply::durable(move |ctx, _| campaigns::pause(ctx, id, reason)),
                    )
                    .await?;
                return Ok(());
            }
            // A disabled project's campaign pauses, and so does one whose sender is no
            // longer a verified domain of the project (its emails would only wait in the
            // outbox until they fail); each goes on once that is put right.
            let sender_ok = crate::domain::verified_sender(&*store, p, &c.from)?.is_some();
            if !sender_ok && log.warn_unverified() {
                tracing::error!(project = %p, campaign = %id, from = %c.from,
                    "the campaign's sender is not a verified domain of the project; it waits until it is");
            }
            if stats.queued >= self.config.queue_ahead
                || !sender_ok
                || crate::directory::is_disabled(&*store, p)
            {
                drop(step);
                tokio::time::sleep(PAUSE).await;
                c = campaigns::get(&*store, p, id)?;
                continue;
            }
            let from = c.progress.cursor;
            let to = (from + self.config.batch_size as u64).min(c.progress.total);
            // Per batch: a campaign outlives a day, and a rotation of the project's keys.
            let marketing = Marketing::new(registry, p, Some(id))?;
            let (rendered, to) = self
                .render_batch(p, id, from, to, &content, &marketing)
                .await?;
            let spec = spec(&c, content.clone(), marketing);
            let batch = QueueBatch {
                id,
                from,
                to,
                spec,
                rendered,
            };
            let after = registry
                .send(
                    p,
                    Apply::durable(move |ctx, _| campaigns::queue_batch(ctx, batch)),
                )
                .await?;
            registry.outbox_signal().notify_one();
            registry.faults().hit(crate::faults::Point::CampaignBatch);
            match after {
                Some(next) => c = next,
                // Cancelled, or another runner queued it: reread.
                None => c = campaigns::get(&*store, p, id)?,
            }
            drop(step);
        }
        if sending(&c) {
            let stats = campaign_stats::load(&*store, p, id)?;
            tracing::info!(project = %p, campaign = %id, recipients = c.progress.total,
                queued = stats.queued + stats.sent() + stats.failed, skipped = stats.skipped,
                seconds = log.started.elapsed().as_secs_f64(), "campaign queued in full");
        }
        self.drain(p, id, log).await
    }

    /// Watches a campaign that has queued everyone until its outbox is empty, logging
    /// its progress. The outcome of its last email ends it (SENT); this only ends one
    /// whose last outcome came before a crash left it SENDING, or before the last batch.
    async fn drain(&self, p: ProjectId, id: CampaignId, mut log: Progress) -> Result<()> {
        let store = self.registry.store().clone();
        loop {
            let Some(step) = self.registry.drain().enter(Work::Campaign) else {
                return Ok(());
            };
            if !self.registry.ownership().owns(p) {
                return Err(Error::NotOwner { project: p });
            }
            let c = campaigns::get(&*store, p, id)?;
            if !sending(&c) {
                return Ok(());
            }
            let stats = campaign_stats::load(&*store, p, id)?;
            if campaign_end::drained(&c, &stats) {
                let settled = self
                    .registry
                    .send(p, Apply::durable(move |ctx, _| campaigns::settle(ctx, id)))
                    .await?;
                if settled {
                    return Ok(());
                }
            }
            log.maybe(p, &c, &stats);
            drop(step);
            tokio::time::sleep(DRAIN_POLL).await;
        }
    }

    /// Fixes the audience: computed off every thread that serves requests, written down
    /// in chunks, then marked fixed. Answers None when the campaign stopped meanwhile.
    async fn fix_audience(&self, p: ProjectId, c: &Campaign) -> Result<Option<Campaign>> {
        let registry = &self.registry;
        let (store, table) = (registry.store().clone(), registry.contacts(p));
        let (campaign, now) = (c.clone(), registry.clock().now().timestamp_millis());
        let started = Instant::now();
        let ids = registry
            .renders()
            .run(move || audience::members(&*store, &table, p, &campaign, now))
            .await??;
        let total = ids.len() as u64;
        let id = c.id;
        let chunks: Vec<Vec<_>> = ids.chunks(CHUNK).map(<[_]>::to_vec).collect();
        for (i, group) in chunks.chunks(CHUNKS_PER_WRITE).enumerate() {
            let (first, group) = ((i * CHUNKS_PER_WRITE) as u32, group.to_vec());
            let written = registry
                .send(
                    p,
                    Apply::durable(move |ctx, _| campaigns::write_audience(ctx, id, first, group)),
                )
                .await?;
            if !written {
                return Ok(None);
            }
        }
        let fixed = registry
            .send(
                p,
                Apply::durable(move |ctx, _| campaigns::fix_audience(ctx, id, total)),
            )
            .await?;
        tracing::info!(project = %p, campaign = %id, recipients = total,
            ms = started.elapsed().as_millis() as u64, "campaign audience fixed");
        Ok(fixed)
    }

    /// Renders the emails of recipients `from..to`: each contact as it is now, those
    /// gone or unsubscribed left out (the queue counts them as skipped). A recipient
    /// whose render fails (its data passes a limit) is skipped with a warning rather
    /// than stopping the campaign. Stops early past `BATCH_BYTES`; answers the
    /// rendered emails and where the batch ends.
    async fn render_batch(
        &self,
        p: ProjectId,
        id: CampaignId,
        from: u64,
        to: u64,
        content: &Arc<Compiled>,
        marketing: &Marketing,
    ) -> Result<(Vec<Rendered>, u64)> {
        let store = self.registry.store().clone();
        let table = self.registry.contacts(p);
        let (content, marketing) = (content.clone(), marketing.clone());
        let metrics = self.registry.metrics().clone();
        self.registry
            .renders()
            .run(move || {
                // The runner may reach a project it just took before the project's
                // actor has read its contacts: an unloaded table finds no one, and
                // the whole batch would be counted as skipped and never sent.
                table.ensure_loaded(&*store, p)?;
                let mut out = Vec::new();
                let (mut bytes, mut failed) = (0usize, 0u64);
                let mut chunk_no = u32::MAX;
                let mut chunk = Vec::new();
                for i in from..to {
                    if bytes >= BATCH_BYTES {
                        return Ok((out, i));
                    }
                    let n = (i / CHUNK as u64) as u32;
                    if n != chunk_no {
                        chunk = campaigns::audience_chunk(&*store, p, id, n)?;
                        chunk_no = n;
                    }
                    let Some(&cid) = chunk.get((i % CHUNK as u64) as usize) else {
                        continue;
                    };
                    let Some(contact) = table.get(cid)?.filter(|c| c.subscribed) else {
                        continue;
                    };
                    let r = Recipient {
                        contact,
                        name: None,
                        existed: true,
                        email_id: EmailId::new(),
                    };
                    let one = sending::plan(&content, &Map::new(), vec![r], Some(&marketing))
                        .and_then(|(jobs, _)| {
                            sending::render(&metrics, &content, jobs, Some(&marketing), false)
                        });
                    match one {
                        Ok(rendered) => {
                            for r in rendered {
                                bytes += r.content.as_ref().map_or(0, |(s, h)| s.len() + h.len());
                                out.push(r);
                            }
                        }
                        Err(e) => {
                            // One line per batch, not per recipient.
                            if failed == 0 {
                                tracing::warn!(project = %p, campaign = %id, contact = %cid, error = %e, "a recipient's email does not render; skipped");
                            }
                            failed += 1;
                        }
                    }
                }
                if failed > 1 {
                    tracing::warn!(project = %p, campaign = %id, failed, "recipients of this batch skipped: their emails do not render");
                }
                Ok((out, to))
            })
            .await?
    }
}

fn sending(c: &Campaign) -> bool {
    c.status == CampaignStatus::Sending
}

/// The send a campaign's batches are written with.
pub(crate) fn spec(c: &Campaign, content: Arc<Compiled>, marketing: Marketing) -> SendSpec {
    SendSpec {
        recipients: Vec::new(),
        subscribed: None,
        content,
        data: Map::new(),
        from: Mailbox::new(c.from_name.clone(), &c.from),
        reply_to: c.reply_to.clone(),
        headers: Vec::new(),
        attachments: Vec::new(),
        marketing: Some(marketing),
        test: false,
        idempotency: None,
        execution: None,
    }
}

/// The progress log of one campaign: every `every`, how far it got, how fast its
/// emails leave the outbox since this runner started, and how long the rest will take.
struct Progress {
    started: Instant,
    every: Duration,
    last: Instant,
    last_warning: Option<Instant>,
    /// Emails done (sent, failed or cancelled) when this runner first looked: a runner
    /// resumed after a restart rates only what it saw go.
    done_at_start: Option<u64>,
}

impl Progress {
    fn new(every: Duration) -> Self {
        let now = Instant::now();
        Progress {
            started: now,
            every,
            last: now,
            last_warning: None,
            done_at_start: None,
        }
    }

    /// Whether to log the unverified sender again (once a minute).
    fn warn_unverified(&mut self) -> bool {
        let due = self
            .last_warning
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(60));
        if due {
            self.last_warning = Some(Instant::now());
        }
        due
    }

    fn maybe(&mut self, p: ProjectId, c: &Campaign, s: &crate::campaign::CampaignStats) {
        let done = s.sent() + s.failed + s.cancelled;
        let first = *self.done_at_start.get_or_insert(done);
        if self.last.elapsed() < self.every {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = done.saturating_sub(first) as f64 / secs;
        let not_yet_queued = c.progress.total.saturating_sub(c.progress.cursor);
        let left = s.queued + not_yet_queued;
        let eta = if rate > 0.0 {
            format!("{:.0}", left as f64 / rate)
        } else {
            "unknown".to_owned()
        };
        tracing::info!(project = %p, campaign = %c.id, recipients = c.progress.total,
            not_yet_queued, queued = s.queued, sent = s.sent(), failed = s.failed,
            rate_per_sec = format!("{rate:.1}"), seconds_left = eta,
            "campaign progress");
    }
}
