//! The Dispatcher walks the outbox project by project (each project's queue in due
//! order, see `round`), hands due emails to the mailers round
//! robin, and records each outcome through the project's actor. It holds at most
//! `max_in_flight` emails in memory at a time.
//!
//! Pacing: each project has a pace (`sending.rate_per_second`, no bursts; `crate::pace`,
//! whose state moves with the project to its next owner), and
//! an email waits for its turn right before it goes to a mailer, not when it leaves the
//! outbox, so that a slow moment between the two cannot bunch deliveries up (measured:
//! pacing at the outbox let 36-43 emails arrive in one second at 14/s). A paced project
//! has at most `PACED_IN_FLIGHT` emails out of the outbox at once, so its waiting never
//! holds the slots that other projects' emails need.
//!
//! In a cluster it sends only the emails of projects this node owns: a project's
//! emails are handed to a mailer only while `owns(p)`, asked again right before the
//! mailer gets them (a paced email may wait), and by the mailer once more right before
//! the SMTP transaction (`Deliver::owner`: the wait for the relay may outlast the
//! lease). An email the mailer gives back that way gets no outcome and stays in the
//! outbox for the new owner. Each holds the project's work gate (`Ownership::enter`)
//! until its outcome is written or it was given back, which a release waits for.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::{
    Actor, ActorContext, ActorFutureExt, Addr, AsyncContext, Context, Supervised, WrapFuture,
};
use tokio::sync::Notify;

use super::messages::{Deliver, Delivery, Owner};
use super::outbox;
use super::{DkimLookup, MailerActor};
use crate::clock::Clock;
use crate::cluster::ownership::Working;
use crate::email::sending;
use crate::email::sending::{DeliveryOutcome, RecordDelivery};
use crate::model::{EmailId, OutboundEmail, ProjectId};
use crate::project::Registry;
use crate::shutdown::{Busy, Work};
use crate::store::{keys, Store};

#[derive(Debug, Clone, Copy)]
pub struct DispatcherConfig {
    /// Emails per second per project; 0 = unpaced.
    pub rate_per_second: u32,
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    pub max_in_flight: usize,
}

/// Emails of one paced project that may be between the outbox and the SMTP server.
const PACED_IN_FLIGHT: usize = 2;

struct Shared {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    registry: Registry,
    mailers: Vec<Addr<MailerActor>>,
    dkim: DkimLookup,
    config: DispatcherConfig,
    limiter: Option<Arc<crate::pace::Pace>>,
    wake: Arc<Notify>,
    in_flight: Mutex<HashMap<EmailId, ProjectId>>,
    /// Where the last round stopped for want of free slots: the next starts there, so
    /// projects later in key order get their turn.
    resume: Mutex<Option<Vec<u8>>>,
}

pub struct Dispatcher {
    shared: Arc<Shared>,
}

impl Dispatcher {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        registry: Registry,
        mailers: Vec<Addr<MailerActor>>,
        dkim: DkimLookup,
        config: DispatcherConfig,
    ) -> Self {
        // One email every 1/rate seconds, 2% slower than that: SMTP arrival jitter of up to
        // ~20 ms then still never puts rate + 1 deliveries into one second, and the average
        // stays within 0.5/s of the rate up to 25/s.
        let limiter = NonZeroU32::new(config.rate_per_second).map(|n| {
            let period = Duration::from_secs_f64(1.02 / f64::from(n.get()));
            let pace = Arc::new(crate::pace::Pace::new(period, 1));
            // A project that moves to another node keeps its place in the pace there.
            registry.carry_pace("sending", pace.clone());
            pace
        });
        let wake = registry.outbox_signal();
        Dispatcher {
            shared: Arc::new(Shared {
                store,
                clock,
                registry,
                mailers,
                dkim,
                config,
                limiter,
                wake,
                in_flight: Mutex::new(HashMap::new()),
                resume: Mutex::new(None),
            }),
        }
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let shared = self.shared.clone();
        let run = std::panic::AssertUnwindSafe(async move { shared.run().await });
        // A panic in a round ends the loop, not the process: the actor stops and its
        // supervisor starts it again, which walks the durable outbox afresh.
        ctx.spawn(
            futures_util::FutureExt::catch_unwind(run)
                .into_actor(self)
                .map(|ran, _, ctx| {
                    if ran.is_err() {
                        tracing::error!("the dispatcher panicked; it restarts from the outbox");
                        ctx.stop();
                    }
                }),
        );
    }
}

impl Supervised for Dispatcher {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        // The outbox is the queue, so there is nothing else to rebuild. The emails in
        // flight stay marked: their deliveries run on and end them, and no round hands
        // them out twice meanwhile. Where the last round stopped is forgotten, in case
        // it is what panicked.
        *self.shared.resume.lock().unwrap_or_else(|p| p.into_inner()) = None;
        tracing::warn!("dispatcher restarting; resuming from the outbox");
    }
}

/// One email handed out, from the round that took it until its delivery ends, however
/// it ends (a panic too): then it is no longer in flight, and the next round may take
/// it again if it is still in the outbox.
struct InFlight {
    shared: Arc<Shared>,
    id: EmailId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.shared.registry.attempts().end(self.id);
        self.shared.in_flight().remove(&self.id);
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<EmailId, ProjectId>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(self: Arc<Self>) {
        let mut next = 0usize;
        loop {
            let wait = self.clone().round(&mut next);
            // A new email, a finished delivery or the next due time wakes the next round.
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass over what is due; returns how long to sleep if nothing wakes us sooner.
    ///
    /// The outbox is grouped by project (`keys::outbox_of`), each project's emails in due
    /// order. A round reads the head of each project's queue and jumps past the rest to
    /// the next project: it reads about as many entries as it can hand out (plus those in
    /// flight), however long a paced project's backlog is.
    fn round(self: Arc<Self>, next_mailer: &mut usize) -> Duration {
        let now = self.clock.now().timestamp_millis();
        let mut wait = Duration::from_secs(1);
        let mut started = 0usize;
        // From where the last round ran out of slots to the end, then from the start
        // round to there: each project once.
        let start = self.resume.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut next_project = start.clone();
        let mut wrapped = start.is_none();
        'projects: loop {
            // Only durable entries: an email is never sent before its record would
            // survive a crash (a send that a crash took back must not have gone out).
            let head = self
                .store
                .scan_durable(keys::OUTBOX, next_project.as_deref())
                .next();
            let key = match head {
                Some(Ok((key, _))) => key,
                Some(Err(e)) => {
                    tracing::error!(error = %e, "reading the outbox");
                    break;
                }
                None if wrapped => break,
                None => {
                    wrapped = true;
                    next_project = None;
                    continue;
                }
            };
            if wrapped && start.as_deref().is_some_and(|s| key.as_slice() > s) {
                break;
            }
            let Some((_, project, _)) = keys::parse_outbox(&key) else {
                // Not an outbox key of ours: step over it rather than stop every round.
                tracing::error!(key = ?key, "an outbox key that does not parse");
                next_project = Some(key);
                continue;
            };
            next_project = Some(keys::outbox_after(project));
            // A disabled project's mail waits in the outbox until it is enabled; another
            // node's goes out there.
            if !self.registry.ownership().owns(project)
                || crate::directory::is_disabled(&*self.store, project)
            {
                continue;
            }
            for kv in self.store.scan_durable(&keys::outbox_of(project), None) {
                let Ok((key, _)) = kv else { break };
                let Some((due, _, id)) = keys::parse_outbox(&key) else {
                    continue;
                };
                if due > now {
                    wait = wait.min(Duration::from_millis((due - now) as u64));
                    break;
                }
                if self.in_flight().len() >= self.config.max_in_flight {
                    // The next round starts with the project after this one (this
                    // one comes last then): round robin over projects with work.
                    *self.resume.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(keys::outbox_after(project));
                    break 'projects;
                }
                if self.in_flight().contains_key(&id) {
                    continue;
                }
                if self.limiter.is_some()
                    && self.in_flight().values().filter(|p| **p == project).count()
                        >= PACED_IN_FLIGHT
                {
                    break;
                }
                // A clean stop hands out nothing more; what is left waits in the outbox.
                let Some(busy) = self.registry.drain().enter(Work::Delivery) else {
                    break 'projects;
                };
                // Nor does a project being handed over (or whose lease ran out).
                let Some(working) = self.registry.ownership().enter(project) else {
                    break;
                };
                self.registry
                    .faults()
                    .hit(crate::faults::Point::DispatcherRound);
                if !self.registry.attempts().pick(id) {
                    // A cancel is dropping it right now.
                    continue;
                }
                self.in_flight().insert(id, project);
                let mailer = self.mailers[*next_mailer % self.mailers.len()].clone();
                *next_mailer += 1;
                started += 1;
                actix::spawn(
                    self.clone()
                        .deliver(project, id, key, mailer, (busy, working)),
                );
            }
        }
        if started > 0 {
            tracing::trace!(started, "dispatched");
        }
        wait
    }

    /// Records an outcome, trying again until the project actor takes it: an outcome
    /// dropped because a mailbox was full would leave the outbox entry behind, and the
    /// email would be sent again. Until then the email stays in flight, so no round
    /// hands it out a second time.
    async fn record(
        &self,
        project: ProjectId,
        id: EmailId,
        key: Vec<u8>,
        outcome: DeliveryOutcome,
    ) {
        let mut backoff = Duration::from_millis(5);
        let mut tries = 0u32;
        loop {
            let msg = RecordDelivery {
                id,
                outbox_key: key.clone(),
                outcome: outcome.clone(),
            };
            // Held rather than owned: the relay has taken this email, so its outcome is
            // written even while the project is being handed over.
            match self.registry.send_held(project, msg).await {
                Ok(()) => return,
                // The lease moved while the relay had it (a pause past the lease): the
                // fence refused the outcome, and the email is still in the new owner's
                // outbox. One of the few that may go twice.
                Err(crate::error::Error::NotOwner { .. }) => {
                    tracing::warn!(email = %id, %project, outcome = ?outcome, "the project moved to another node before this email's outcome was written; its new owner sends it again");
                    return;
                }
                // Anything but a full mailbox will not get better by asking again: the
                // outbox entry stays, and a later round tries the email again.
                Err(e) if !matches!(e, crate::error::Error::Busy { .. }) => {
                    tracing::error!(email = %id, error = %e, "recording a delivery outcome failed");
                    return;
                }
                Err(e) => {
                    tries += 1;
                    if tries == 1 || tries.is_multiple_of(100) {
                        tracing::warn!(email = %id, error = %e, tries, "recording a delivery outcome; will retry");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// One delivery attempt of a loaded email, and what it came to; None when it was not
    /// sent and stays in the outbox: a clean stop came while it waited for its turn, or
    /// the project was no longer this node's when it was to go.
    async fn attempt(
        &self,
        project: ProjectId,
        id: EmailId,
        mut email: OutboundEmail,
        mailer: Addr<MailerActor>,
    ) -> Option<DeliveryOutcome> {
        if let Some(files) = email.attachments_id {
            match sending::load_attachments(&*self.store, project, files) {
                Ok(a) => email.attachments = a,
                Err(e) => {
                    tracing::error!(email = %id, error = %e, "loading attachments");
                    return Some(DeliveryOutcome::Failed {
                        error: e.to_string(),
                    });
                }
            }
        }
        match sending::load_text(&*self.store, project, id) {
            Ok(text) => email.text = text,
            Err(e) => {
                tracing::error!(email = %id, error = %e, "loading the text part");
                return Some(DeliveryOutcome::Failed {
                    error: e.to_string(),
                });
            }
        }
        let attempts = email.attempts + 1;
        let result = match (self.dkim)(project, &email.from.email) {
            Err(why) => {
                let why = crate::error::chain(&why);
                tracing::warn!(email = %id, %project, reason = %why, "no DKIM key for the sender; the email waits");
                Delivery::Transient(why)
            }
            Ok(dkim) => {
                if let Some(limiter) = &self.limiter {
                    tokio::select! {
                        _ = limiter.until_ready(project) => {}
                        _ = self.registry.drain().stopped() => return None,
                    }
                }
                // A stop, or the project moved to another node while it waited.
                if self.registry.drain().is_stopping() || !self.registry.ownership().owns(project) {
                    return None;
                }
                if !self.registry.attempts().begin(id) {
                    // Its campaign was cancelled while it waited for its turn.
                    return Some(DeliveryOutcome::Orphan);
                }
                let owner = Owner::new(self.registry.ownership().clone(), project);
                mailer
                    .send(Deliver { email, dkim, owner })
                    .await
                    .unwrap_or_else(|e| Delivery::Transient(format!("mailer unavailable: {e}")))
            }
        };
        let now = self.clock.now().timestamp_millis();
        Some(match result {
            // The project moved while the mailer waited for the relay: nothing was sent,
            // and the new owner sends it from the outbox (an outcome written here would
            // be refused by the fence, or worse, land before the new owner's).
            Delivery::NotOwned => {
                tracing::info!(email = %id, %project, "the project moved to another node before the SMTP transaction; the email is left to its new owner");
                return None;
            }
            Delivery::Sent => DeliveryOutcome::Sent { at: now },
            Delivery::Permanent(e) => DeliveryOutcome::Bounced { error: e },
            Delivery::Failed(e) => DeliveryOutcome::Failed { error: e },
            Delivery::RelayFault(e) => {
                tracing::error!(email = %id, %project, error = %e, "the relay refused us, not the recipient; the email waits");
                self.retry_or_fail(e, attempts, now)
            }
            Delivery::Transient(e) => self.retry_or_fail(e, attempts, now),
        })
    }

    /// A failure worth another try: retried with backoff, or FAILED past
    /// `sending.max_attempts`.
    fn retry_or_fail(&self, error: String, attempts: u32, now: i64) -> DeliveryOutcome {
        if attempts >= self.config.max_attempts {
            return DeliveryOutcome::Failed { error };
        }
        DeliveryOutcome::Retry {
            error,
            due_at: now + outbox::backoff_ms(self.config.retry_base_ms, attempts) as i64,
        }
    }

    async fn deliver(
        self: Arc<Self>,
        project: ProjectId,
        id: EmailId,
        key: Vec<u8>,
        mailer: Addr<MailerActor>,
        // Held until the outcome is written: a clean stop and the project's release
        // wait for it.
        _busy: (Busy, Option<Working>),
    ) {
        let _flight = InFlight {
            shared: self.clone(),
            id,
        };
        let email = match sending::read_email(&*self.store, project, id) {
            Ok(email) => email,
            Err(e) => {
                // A read that failed is not a missing email: leave it in the outbox and
                // in flight a moment, then free the slot for a later round.
                tracing::warn!(email = %id, error = %e, "reading an email to deliver; will retry");
                tokio::time::sleep(Duration::from_secs(1)).await;
                return;
            }
        };
        let outcome = match email {
            // Read, but it does not decode (damaged): it never will, so it is not
            // retried every round; recording drops its outbox entry and says so.
            Some(Err(_)) => Some(DeliveryOutcome::Orphan),
            Some(Ok(email)) => match email {
                // Final already (a cancel dropped it): nothing to send.
                email if email.status != crate::model::EmailStatus::Queued => {
                    Some(DeliveryOutcome::Orphan)
                }
                // Suppressed since it was queued (a campaign queues ahead; a retry
                // waits): it fails with the reason instead of reaching the address.
                email => match self.suppressed(project, &email) {
                    Some(reason) => Some(DeliveryOutcome::Failed {
                        error: format!("the address is on the suppression list ({reason})"),
                    }),
                    None => self.attempt(project, id, email, mailer).await,
                },
            },
            // Gone: nothing to send.
            None => Some(DeliveryOutcome::Orphan),
        };
        if let Some(outcome) = outcome {
            self.record(project, id, key, outcome).await;
        }
    }

    /// Why the email's address is suppressed now, if it is (a failed read sends: the
    /// check at queueing time stands).
    fn suppressed(
        &self,
        project: ProjectId,
        email: &crate::model::OutboundEmail,
    ) -> Option<&'static str> {
        let to = email.to.email.address()?;
        let now = self.clock.now().timestamp_millis();
        match crate::suppression::lookup(&*self.store, project, to.as_str(), now) {
            Ok(found) => found.map(|s| s.reason.as_str()),
            Err(e) => {
                tracing::warn!(email = %email.id, error = %e, "reading the suppression list before a send");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::project::RegistryConfig;
    use crate::store::{Batch, SledStore};

    /// What one round costs with a paced project's 100,000 emails due and its two
    /// in-flight slots taken (so the round dispatches nothing and only looks).
    /// `cargo test -p mailroom-actors --release a_round_over -- --ignored --nocapture`
    #[actix::test]
    #[ignore = "a measurement: cargo test -p mailroom-actors --release a_round_over -- --ignored --nocapture"]
    async fn a_round_over_a_paced_backlog_of_100000() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = SledStore::open(dir.path(), 64 << 20).unwrap();
        let p = ProjectId::new();
        let mut batch = Batch::new();
        let mut first = Vec::new();
        for i in 0..100_000i64 {
            let id = EmailId::new();
            if i < 2 {
                first.push(id);
            }
            batch.put(keys::outbox(1_000 + i, p, id), Vec::new());
        }
        store.apply(batch).unwrap();
        // As in steady state: the writes are in sled, the overlay (10 ms of writes) empty.
        store.flush_blocking().unwrap();
        let registry = Registry::new(
            store.clone(),
            Arc::new(SystemClock),
            RegistryConfig {
                mailbox_capacity: 16,
                ..Default::default()
            },
            crate::links::Links::for_tests(),
            crate::wiring::hooks(),
        );
        let dkim: DkimLookup =
            Arc::new(|_, _| Err(crate::mailer::NoKey::Unverified("unused".into())));
        let config = DispatcherConfig {
            rate_per_second: 14,
            max_attempts: 1,
            retry_base_ms: 1,
            max_in_flight: 32,
        };
        let d = Dispatcher::new(
            store,
            Arc::new(SystemClock),
            registry,
            Vec::new(),
            dkim,
            config,
        );
        for id in first {
            d.shared.in_flight().insert(id, p);
        }
        let mut next = 0;
        let started = std::time::Instant::now();
        let rounds = 20;
        for _ in 0..rounds {
            d.shared.clone().round(&mut next);
        }
        let per_round = started.elapsed() / rounds;
        eprintln!("one round over a paced backlog of 100,000: {per_round:?}");
    }
}
