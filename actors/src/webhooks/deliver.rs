//! The delivery loop of a node. The event log is the queue of first deliveries: each
//! endpoint has a cursor (`keys::webhook_cursor`), and the loop walks the log of every
//! project the fan-out noted (and, every `SWEEP`, of every project this node owns that
//! has an endpoint) from there, reading durable events only; an event the endpoint wants
//! that has no delivery record yet is sent, and its outcome written through the
//! project's actor as its record: delivered, failed for good, or retried on the
//! schedule through the queue of retries (`keys::webhook_due`), which the loop walks
//! too. It runs every 200 ms, when a project is noted, and whenever an attempt ends,
//! with at most `max_in_flight` requests at once, `max_in_flight_per_endpoint` per
//! endpoint and `max_in_flight_per_project` per project, so a slow or dead endpoint
//! holds a few slots, not the loop, and never an actor or an HTTP worker. An attempt
//! whose outcome a `kill -9` lost left no record (or its retry is still queued), so it
//! is sent again under the same `webhook-id`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Result;
use crate::id::KeyId;
use crate::model::{DeliveryId, Event, EventId, ProjectId, Timestamp, WebhookId};
use crate::project::apply::Apply;
use crate::project::registry::Registry;
use crate::store::{blocks, keys, Batch};
use crate::workflow::webhook::{Session, WebhookClient};

use super::model::{Delivery, DeliveryStatus, Webhook};
use super::{records, sign, WebhookConfig};

const ROUND: Duration = Duration::from_millis(200);

/// Queue entries one round looks at, at most: the due ones come first, and a backlog of
/// thousands for a few busy endpoints must not make every round walk all of it (a
/// round runs each time an attempt ends). The next round goes on from where one that
/// reached the bound stopped, so every due retry is looked at in turn.
const ROUND_SCAN: usize = 512;

/// One endpoint's attempts, made one after another.
type Lane = (ProjectId, WebhookId, Vec<Job>);

/// Deliveries one lane sends, one after another, before its slot goes back.
const LANE: usize = 64;

/// The headers of a delivery (and of a test event).
pub fn headers(hook: &Webhook, id: &str, now: Timestamp, body: &[u8]) -> Vec<(String, String)> {
    let ts = now.millis().div_euclid(1000);
    vec![
        ("content-type".into(), "application/json".into()),
        ("webhook-id".into(), id.to_owned()),
        ("webhook-timestamp".into(), ts.to_string()),
        (
            "webhook-signature".into(),
            sign::header(&hook.signing_secrets(now.millis()), id, ts, body),
        ),
    ]
}

/// What an attempt got.
enum Answer {
    Status(u16),
    NoAnswer(String),
}

pub struct Deliverer {
    registry: Registry,
    client: Arc<WebhookClient>,
    config: WebhookConfig,
    /// Attempts under way, by endpoint: a delivery's id is its event's, the same for
    /// every endpoint of the project that wants the event.
    in_flight: Mutex<HashSet<(WebhookId, DeliveryId)>>,
    /// Lanes under way, by endpoint and by project.
    slots: Mutex<Slots>,
    /// Rung when an attempt ends: its slot can take the next delivery at once.
    freed: tokio::sync::Notify,
    /// Projects whose logs the next round walks: noted by the fan-out, kept while a
    /// walk left work behind, and every project with an endpoint at each sweep.
    dirty: Mutex<HashSet<ProjectId>>,
    /// Where each endpoint's walk stands in memory (see `Mark`).
    marks: Mutex<HashMap<(ProjectId, WebhookId), Mark>>,
    /// Which noted project a round walks first.
    turn: std::sync::atomic::AtomicUsize,
    /// Connections lanes left open, by endpoint, with when each was last used: the next
    /// lane of the endpoint takes one, so a trickle of events does not cost a handshake
    /// each (at most `max_in_flight_per_endpoint` an endpoint, none idle past `IDLE`).
    idle: Mutex<Idle>,
    /// Where the next round's look at the retries due starts (None: the queue's start).
    due_from: Mutex<Option<Vec<u8>>>,
}

/// Kept connections by endpoint, each with when it was last used, oldest first.
type Idle = HashMap<(ProjectId, WebhookId), Vec<(std::time::Instant, Session)>>;

/// How long a connection is kept open with nothing to send (receivers commonly close
/// theirs after a minute or more; a kept one that was closed is found out and replaced).
const IDLE: Duration = Duration::from_secs(30);

/// An endpoint's walk between rounds. Under load the log grows by thousands of events a
/// second, and a walk from the stored cursor each round would read the ones under way
/// again and again: the next walk starts after the newest event handed out, and the
/// stored cursor, written at most once a second, only bounds the walk after a start.
#[derive(Default)]
struct Mark {
    /// Every wanted event below this id is settled (delivered, failed, retrying, or not
    /// to be sent): the walk's start in memory, ahead of the stored cursor.
    settled: Option<[u8; 16]>,
    /// The newest event handed to a lane since the walk last started from `settled`.
    handed: Option<[u8; 16]>,
    /// First attempts under way, by event id: the cursor stays at or below the oldest.
    under_way: std::collections::BTreeSet<[u8; 16]>,
    /// When the cursor was last written.
    written: Option<std::time::Instant>,
}

/// How often an endpoint's cursor is written, at most.
const CURSOR_EVERY: Duration = Duration::from_secs(1);

/// How often every owned project with an endpoint is walked, noted or not: after a
/// start, a move of a project to this node, or a note lost to a crash.
const SWEEP: Duration = Duration::from_secs(2);

/// One attempt to make: the delivery, when it was due, and whether it is a first one
/// (no record yet: built from its event) or a retry from the queue.
#[derive(Clone, Copy)]
struct Job {
    delivery: DeliveryId,
    due: i64,
    first: bool,
}

impl Deliverer {
    /// Starts the loop on the current runtime; it ends when the engine stops.
    pub fn start(
        registry: Registry,
        client: Arc<WebhookClient>,
        config: WebhookConfig,
    ) -> Arc<Deliverer> {
        let me = Arc::new(Deliverer {
            registry,
            client,
            config,
            in_flight: Mutex::default(),
            slots: Mutex::default(),
            freed: tokio::sync::Notify::new(),
            dirty: Mutex::default(),
            marks: Mutex::default(),
            turn: Default::default(),
            idle: Mutex::default(),
            due_from: Mutex::default(),
        });
        let looping = me.clone();
        tokio::spawn(async move {
            let mut swept: Option<std::time::Instant> = None;
            loop {
                if swept.is_none_or(|at| at.elapsed() >= SWEEP) {
                    swept = Some(std::time::Instant::now());
                    let me = looping.clone();
                    match tokio::task::spawn_blocking(move || me.sweep()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "listing the projects with webhooks")
                        }
                        Err(e) => tracing::warn!(error = %e, "listing the projects with webhooks"),
                    }
                }
                let noted = looping.registry.wakeups().webhooks().take();
                looping.dirty().extend(noted);
                if let Err(e) = looping.round() {
                    tracing::warn!(error = %e, "a webhook delivery round failed; trying again");
                }
                let ran = std::time::Instant::now();
                tokio::select! {
                    _ = tokio::time::sleep(ROUND) => {}
                    _ = looping.freed.notified() => {}
                    _ = looping.registry.wakeups().webhooks().notified() => {}
                    _ = looping.registry.drain().stopped() => return,
                }
                // Under load every batch of events notes its project: rounds are spaced
                // so that one walks the events of many batches (measured: a round per
                // note cost /v1/track more than the deliveries did).
                if let Some(rest) = looping.config.round_gap.checked_sub(ran.elapsed()) {
                    tokio::time::sleep(rest).await;
                }
            }
        });
        me
    }

    fn due_from(&self) -> std::sync::MutexGuard<'_, Option<Vec<u8>>> {
        self.due_from.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dirty(&self) -> std::sync::MutexGuard<'_, HashSet<ProjectId>> {
        self.dirty.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes every project this node owns that has an endpoint.
    fn sweep(&self) -> Result<()> {
        let store = self.registry.store().clone();
        let mut found = Vec::new();
        for project in crate::directory::Projects::new(store.clone()).list()? {
            if self.registry.ownership().owns(project.id)
                && store
                    .scan(&keys::webhooks(project.id), None, false)
                    .next()
                    .is_some()
            {
                found.push(project.id);
            }
        }
        // A project that moved away starts afresh if it comes back.
        let owned: HashSet<ProjectId> = found.iter().copied().collect();
        self.marks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(p, _), _| owned.contains(p));
        self.dirty().extend(found);
        // Connections idle too long close, and those of projects gone from this node;
        // a deleted or disabled endpoint's go once idle that long.
        let mut idle = self.idle();
        for kept in idle.values_mut() {
            kept.retain(|(at, _)| at.elapsed() < IDLE);
        }
        idle.retain(|(p, _), kept| !kept.is_empty() && owned.contains(p));
        Ok(())
    }

    /// A connection left open to `w`, if one was used lately.
    fn session(&self, p: ProjectId, w: WebhookId) -> Session {
        let mut idle = self.idle();
        let kept = idle.get_mut(&(p, w));
        let found = kept.and_then(|k| k.pop().filter(|(at, _)| at.elapsed() < IDLE));
        found.map(|(_, s)| s).unwrap_or_default()
    }

    /// Keeps a lane's connection for the endpoint's next lane: at most
    /// `max_in_flight_per_endpoint` an endpoint, `max_in_flight_per_project` a project
    /// and `max_in_flight` in all, the one idle longest closing to make room.
    fn keep_session(&self, p: ProjectId, w: WebhookId, session: Session) {
        if !session.is_open() {
            return;
        }
        let mut idle = self.idle();
        if idle.get(&(p, w)).map_or(0, Vec::len) >= self.config.max_in_flight_per_endpoint {
            return;
        }
        for (of, cap) in [
            (Some(p), self.config.max_in_flight_per_project),
            (None, self.config.max_in_flight),
        ] {
            let within = |q: &ProjectId| of.is_none_or(|of| *q == of);
            let mut kept: usize = idle
                .iter()
                .filter(|((q, _), _)| within(q))
                .map(|(_, v)| v.len())
                .sum();
            while kept >= cap {
                // Each endpoint's list is oldest first (pushed as they come back).
                let oldest = idle
                    .iter()
                    .filter(|((q, _), v)| within(q) && !v.is_empty())
                    .min_by_key(|(_, v)| v[0].0)
                    .map(|(k, _)| *k);
                match oldest.and_then(|k| idle.get_mut(&k)) {
                    Some(v) => drop(v.remove(0)),
                    None => return,
                }
                kept -= 1;
            }
        }
        idle.entry((p, w))
            .or_default()
            .push((std::time::Instant::now(), session));
    }

    /// Hands due work to lanes: a lane is a task that sends one endpoint's deliveries
    /// one after another, at most `LANE` of them, and an endpoint has at most
    /// `max_in_flight_per_endpoint` lanes. The work is the retries due in the queue,
    /// then, for each noted project and each of its endpoints, the events of its log from
    /// the endpoint's cursor on that have no delivery yet (read as durable, so an event a
    /// crash could take back is never announced).
    fn round(self: &Arc<Self>) -> Result<()> {
        let now = Timestamp::from(self.registry.clock().now()).millis();
        let store = self.registry.store().clone();
        let mut plan = Plan {
            opened: HashMap::new(),
            lanes: Vec::new(),
            lanes_in_all: 0,
        };
        let mut cursors = Vec::new();
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            let mut per = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            plan.lanes_in_all = per.endpoint.values().sum();
            // The retries due, `ROUND_SCAN` at a time from where the last round stopped:
            // a dead endpoint's backlog at the head of the queue (its slots full, every
            // entry skipped) must not keep the rounds from the retries behind it.
            let from = self.due_from().take();
            let (mut seen, mut last, mut full) = (0, None, false);
            for kv in store.scan(keys::WEBHOOK_DUE, from.as_deref(), false) {
                // An error ends the look at the queue, never the round: lanes already
                // planned hold their slots and must start (and give them back).
                let (k, _) = match kv {
                    Ok(kv) => kv,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the webhook retry queue");
                        break;
                    }
                };
                if seen == ROUND_SCAN {
                    full = true;
                    break;
                }
                seen += 1;
                let parsed = keys::parse_webhook_due(&k);
                last = Some(k);
                let Some((due, p, w, d)) = parsed else {
                    continue;
                };
                if due > now {
                    break;
                }
                if in_flight.contains(&(w, d)) || !self.registry.ownership().owns(p) {
                    continue;
                }
                let job = Job {
                    delivery: d,
                    due,
                    first: false,
                };
                match plan.add(&self.config, &mut per, p, w, job) {
                    Added::Yes => {
                        in_flight.insert((w, d));
                    }
                    Added::EndpointFull => {}
                    Added::AllFull => break,
                }
            }
            // The next round goes on after the last entry looked at, or from the start
            // once the due ones were all seen.
            if full {
                *self.due_from() = last;
            }
            // Round-robin: the project walked first (and so first to the free slots)
            // changes every round, so no project's backlog keeps the others waiting.
            let mut projects: Vec<ProjectId> = self.dirty().drain().collect();
            projects.sort_unstable();
            if !projects.is_empty() {
                let turn = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let len = projects.len();
                projects.rotate_left(turn % len);
            }
            let mut waiting = 0u64;
            for p in projects {
                if !self.registry.ownership().owns(p) {
                    continue;
                }
                let mut again = false;
                let endpoints = match records::all(&*store, p) {
                    Ok(all) => all,
                    Err(e) => {
                        tracing::warn!(project = %p, error = %e, "reading the webhook endpoints");
                        self.dirty().insert(p);
                        continue;
                    }
                };
                for w in endpoints.into_iter().filter(|w| w.enabled) {
                    // An error in one walk costs that endpoint this round, never the
                    // lanes already planned (their slots are taken) or other projects.
                    match self.walk(&*store, p, &w, now, &mut in_flight, &mut per, &mut plan) {
                        Ok(walk) => {
                            waiting += walk.waiting;
                            again |= walk.left_work;
                            if let Some(to) = walk.advance_to {
                                cursors.push((p, w.id, to));
                            }
                        }
                        Err(e) => {
                            tracing::warn!(project = %p, webhook = %w.id, error = %e, "walking the event log for a webhook");
                            again = true;
                        }
                    }
                }
                if again {
                    self.dirty().insert(p);
                }
            }
            self.registry.wakeups().webhooks().set_waiting(waiting);
        }
        for (p, w, to) in cursors {
            let registry = self.registry.clone();
            tokio::spawn(async move {
                let moved = registry
                    .send(
                        p,
                        Apply::applied(move |ctx, _| {
                            let before = records::cursor(ctx.store, p, w)?;
                            if before.is_some_and(|b| b >= to)
                                || records::load(ctx.store, p, w)?.is_none()
                            {
                                return Ok(());
                            }
                            let mut batch = Batch::new();
                            records::put_cursor(&mut batch, p, w, to);
                            ctx.store.apply(batch).map(drop)
                        }),
                    )
                    .await;
                if let Err(e) = moved {
                    tracing::debug!(project = %p, error = %e, "moving a webhook cursor");
                }
            });
        }
        for (p, w, queue) in plan.lanes {
            let me = self.clone();
            tokio::spawn(async move {
                let mut lane = LaneEnd {
                    me: me.clone(),
                    p,
                    w,
                    queue,
                    next: 0,
                    failed: false,
                };
                // One connection for the lane's attempts, kept while the endpoint keeps it.
                let mut session = me.session(p, w);
                while let Some(&job) = lane.queue.get(lane.next) {
                    let last = lane.next + 1 == lane.queue.len();
                    let sent = me.attempt(&mut session, p, w, job, last).await;
                    lane.next += 1;
                    me.release(w, &[job.delivery]);
                    match sent {
                        Ok(true) => {}
                        Ok(false) => {
                            // An endpoint that failed (an error status, a 410, no answer)
                            // keeps no connection: its retry opens a fresh one, and it
                            // takes no idle slot from the project's healthy endpoints.
                            session = Session::default();
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(project = %p, delivery = %job.delivery, error = %e, "a webhook delivery");
                            lane.failed = true;
                            break;
                        }
                    }
                }
                me.keep_session(p, w, session);
            });
        }
        Ok(())
    }

    /// Walks endpoint `w`'s events after the last one handed out (or from where all
    /// before are settled): each it wants that has no delivery and is not under way
    /// becomes a first attempt, while lanes are free.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        store: &dyn crate::store::Store,
        p: ProjectId,
        w: &Webhook,
        now: i64,
        in_flight: &mut HashSet<(WebhookId, DeliveryId)>,
        per: &mut Slots,
        plan: &mut Plan,
    ) -> Result<Walk> {
        let mut out = Walk::default();
        // No cursor: an endpoint made before cursors existed; its past events had their
        // deliveries written with them, so it goes on from now.
        let stored = match records::cursor(store, p, w.id)? {
            Some(c) => c,
            None => {
                let c = *EventId::floor(Timestamp::from(now)).as_bytes();
                out.advance_to = Some(c);
                c
            }
        };
        let mut marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        let mark = marks.entry((p, w.id)).or_default();
        let settled = mark.settled.filter(|s| *s > stored).unwrap_or(stored);
        let from = mark.handed.filter(|h| *h >= settled).unwrap_or(settled);
        // The first wanted event not handed out.
        let mut unplaced: Option<[u8; 16]> = None;
        let mut last = None;
        let mut walked = 0;
        for entry in blocks::iter_durable_from(store, &keys::events(p), from) {
            let (id, bytes) = entry?;
            if mark.handed == Some(id) {
                continue;
            }
            walked += 1;
            if walked > ROUND_SCAN {
                out.left_work = true;
                break;
            }
            last = Some(id);
            let d = DeliveryId::from_key_bytes(id);
            if mark.under_way.contains(&id) || in_flight.contains(&(w.id, d)) {
                continue;
            }
            let event = match Event::decode(&bytes) {
                Ok(e) => e,
                Err(e) => {
                    // Never sendable; it must not hold the walk back either.
                    tracing::error!(project = %p, error = %e, "an event of the log does not decode; no webhook gets it");
                    continue;
                }
            };
            if !w.wants(&event.name) || store.get(&keys::delivery(p, w.id, d))?.is_some() {
                continue;
            }
            out.waiting += 1;
            let job = Job {
                delivery: d,
                due: event.created_at.millis(),
                first: true,
            };
            match plan.add(&self.config, per, p, w.id, job) {
                Added::Yes => {
                    in_flight.insert((w.id, d));
                    mark.under_way.insert(id);
                    mark.handed = Some(mark.handed.map_or(id, |h| h.max(id)));
                }
                Added::EndpointFull | Added::AllFull => {
                    unplaced = Some(id);
                    out.left_work = true;
                    break;
                }
            }
        }
        if !out.left_work {
            // Events applied but not yet durable are walked once they are: until then
            // the project stays noted (its note came before its write was durable).
            let newest = blocks::iter_rev(store, &keys::events(p), None)
                .next()
                .transpose()?;
            if newest.is_some_and(|(id, _)| Some(id) > last.max(mark.handed).max(Some(settled))) {
                out.left_work = true;
            }
        }
        let to = mark
            .under_way
            .first()
            .copied()
            .into_iter()
            .chain(unplaced)
            .min()
            .or(last)
            .or(mark.handed)
            .unwrap_or(settled);
        mark.settled = Some(to.max(settled));
        let due = mark.written.is_none_or(|t| t.elapsed() >= CURSOR_EVERY);
        if to > stored && due {
            mark.written = Some(std::time::Instant::now());
            out.advance_to = Some(to);
        }
        Ok(out)
    }

    /// A lane of `w` ended: its first attempts are no longer under way, and when it
    /// stopped early (`broke`), the next walk starts from the cursor again, so the
    /// attempts it did not make are found.
    fn lane_done(&self, p: ProjectId, w: WebhookId, jobs: &[Job], broke: bool) {
        let mut marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mark) = marks.get_mut(&(p, w)) {
            for j in jobs.iter().filter(|j| j.first) {
                mark.under_way.remove(j.delivery.as_bytes());
            }
            if broke {
                mark.handed = None;
            }
        }
    }

    fn release(&self, w: WebhookId, done: &[DeliveryId]) {
        if done.is_empty() {
            return;
        }
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        for d in done {
            in_flight.remove(&(w, *d));
        }
    }

    /// Sends one delivery and records what it got; true when the endpoint took it (or
    /// it had nothing to send), false when the endpoint failed.
    /// The lane's `last` attempt, when the endpoint took it, hands its connection back
    /// before its outcome is written: a delivery seen as settled has its connection
    /// ready for the next lane.
    async fn attempt(
        &self,
        session: &mut Session,
        p: ProjectId,
        w: WebhookId,
        job: Job,
        last: bool,
    ) -> Result<bool> {
        let store = self.registry.store().clone();
        let stored = records::load_delivery(&*store, p, w, job.delivery)?;
        let first = match (&stored, job.first) {
            // Attempted already (a round that raced the record): nothing to do.
            (Some(_), true) => return Ok(true),
            (None, true) => {
                let event = EventId::from_key_bytes(*job.delivery.as_bytes());
                match event_of(&*store, p, event)? {
                    Some(e) => Some(Delivery {
                        id: job.delivery,
                        webhook: w,
                        event: e.id,
                        kind: e.name.clone(),
                        payload: super::fanout::payload(&*store, p, &e),
                        attempts: 0,
                        status: DeliveryStatus::Pending,
                        status_code: None,
                        error: None,
                        created_at: e.created_at.millis(),
                        attempted_at: None,
                        next_attempt_at: Some(job.due),
                    }),
                    // Erased meanwhile: nothing to send, ever.
                    None => return Ok(true),
                }
            }
            _ => None,
        };
        let delivery = stored.as_ref().or(first.as_ref());
        let hook = records::load(&*store, p, w)?;
        let answer = match (delivery, &hook) {
            (Some(delivery), Some(hook))
                if delivery.status == DeliveryStatus::Pending && hook.enabled =>
            {
                let now = Timestamp::from(self.registry.clock().now());
                let id = delivery.event.to_string();
                let body = delivery.payload.clone().into_bytes();
                let headers = headers(hook, &id, now, &body);
                let sent = self
                    .client
                    .call_in(session, &hook.url, "POST", &headers, body);
                let answer = match sent.await {
                    Ok(code) => Answer::Status(code),
                    Err(e) => {
                        tracing::debug!(project = %p, delivery = %job.delivery, detail = %e.detail(), "a webhook got no answer");
                        Answer::NoAnswer(e.to_string())
                    }
                };
                if last && matches!(answer, Answer::Status(200..=299)) {
                    self.keep_session(p, w, std::mem::take(session));
                }
                Some(answer)
            }
            // Gone, done, or its endpoint disabled: it leaves the queue.
            _ => None,
        };
        let took = matches!(answer, None | Some(Answer::Status(200..=299)));
        if first.is_some() && answer.is_none() {
            // A first attempt that was not made (its endpoint disabled or deleted
            // meanwhile) leaves no record: the cursor or a re-enable decides.
            return Ok(true);
        }
        let config = self.config.clone();
        self.registry
            .send(
                p,
                Apply::durable(move |ctx, _| record(ctx, &config, w, job, answer, first)),
            )
            .await?;
        Ok(took)
    }
}

/// An event of the project's log (read here rather than through the event feature,
/// which reaches the webhooks through retention).
fn event_of(store: &dyn crate::store::Store, p: ProjectId, id: EventId) -> Result<Option<Event>> {
    blocks::get(store, &keys::events(p), id.as_bytes())?
        .map(|b| Event::decode(&b))
        .transpose()
}

/// The end of a lane, however it ends (its attempts done, the endpoint failing, or a
/// panic): the deliveries it did not attempt are released for a later round, and its
/// slot is given back, so that no count is left taken.
struct LaneEnd {
    me: Arc<Deliverer>,
    p: ProjectId,
    w: WebhookId,
    queue: Vec<Job>,
    /// The first job not attempted.
    next: usize,
    failed: bool,
}

impl Drop for LaneEnd {
    fn drop(&mut self) {
        let (me, p, w) = (&self.me, self.p, self.w);
        // An endpoint that failed keeps the rest of its lane for a later round.
        let left: Vec<DeliveryId> = self.queue[self.next.min(self.queue.len())..]
            .iter()
            .map(|j| j.delivery)
            .collect();
        let broke = !left.is_empty() || self.failed;
        if broke {
            me.dirty().insert(p);
        }
        me.release(w, &left);
        me.lane_done(p, w, &self.queue, broke);
        me.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .give_back(p, w);
        me.freed.notify_one();
    }
}

/// Lanes under way, by endpoint and by project.
#[derive(Default)]
struct Slots {
    endpoint: HashMap<WebhookId, usize>,
    project: HashMap<ProjectId, usize>,
}

impl Slots {
    /// A lane of `w` (of `p`) ended.
    fn give_back(&mut self, p: ProjectId, w: WebhookId) {
        fn less<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, k: K) {
            if let Some(n) = map.get_mut(&k) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&k);
                }
            }
        }
        less(&mut self.endpoint, w);
        less(&mut self.project, p);
    }
}

/// What one round hands out: lanes, by endpoint.
struct Plan {
    opened: HashMap<WebhookId, Vec<usize>>,
    lanes: Vec<Lane>,
    lanes_in_all: usize,
}

enum Added {
    Yes,
    EndpointFull,
    AllFull,
}

impl Plan {
    /// Puts `job` in a lane of its endpoint opened this round, or opens one if the
    /// endpoint and the node have a slot.
    fn add(
        &mut self,
        config: &WebhookConfig,
        per: &mut Slots,
        p: ProjectId,
        w: WebhookId,
        job: Job,
    ) -> Added {
        let open = self.opened.entry(w).or_default();
        if let Some(&i) = open.iter().find(|&&i| self.lanes[i].2.len() < LANE) {
            self.lanes[i].2.push(job);
            return Added::Yes;
        }
        // A project at its share is full for each of its endpoints alike.
        if per.endpoint.get(&w).copied().unwrap_or(0) >= config.max_in_flight_per_endpoint
            || per.project.get(&p).copied().unwrap_or(0) >= config.max_in_flight_per_project
        {
            return Added::EndpointFull;
        }
        if self.lanes_in_all >= config.max_in_flight {
            return Added::AllFull;
        }
        *per.endpoint.entry(w).or_default() += 1;
        *per.project.entry(p).or_default() += 1;
        self.lanes_in_all += 1;
        open.push(self.lanes.len());
        self.lanes.push((p, w, vec![job]));
        Added::Yes
    }
}

/// What a walk of one endpoint's events found.
#[derive(Default)]
struct Walk {
    /// Events it wants with no delivery yet, seen in this walk.
    waiting: u64,
    /// It stopped before the log's end (lanes full, or the walk's bound).
    left_work: bool,
    /// Where its cursor may move.
    advance_to: Option<[u8; 16]>,
}

/// Writes what an attempt got, in the project's actor. A first attempt's delivery
/// (`first`, built from its event) gets its record here; a retry's is in the store.
fn record(
    ctx: &crate::project::write::WriteCtx,
    config: &WebhookConfig,
    w: WebhookId,
    job: Job,
    answer: Option<Answer>,
    first: Option<Delivery>,
) -> Result<()> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now.millis());
    let (d, due) = (job.delivery, job.due);
    let mut batch = Batch::new();
    let stored = records::load_delivery(store, p, w, d)?;
    let mut answer = answer;
    let mut delivery = match (stored, first) {
        (Some(stored), None) => {
            batch.delete(keys::webhook_due(due, p, w, d));
            stored
        }
        // Recorded already (an attempt that raced a restart's).
        (Some(_), Some(_)) => return Ok(()),
        (None, Some(mut fresh)) => {
            if event_of(store, p, fresh.event)?.is_none() {
                // The contact was erased while the attempt was under way: no copy of
                // the payload is kept, and no retry sends it again.
                fresh.payload = String::new();
                answer = None;
            }
            fresh
        }
        (None, None) => {
            batch.delete(keys::webhook_due(due, p, w, d));
            return store.apply(batch).map(drop);
        }
    };
    if delivery.status != DeliveryStatus::Pending || delivery.next_attempt_at != Some(due) {
        // Recorded already (an attempt that raced a restart's).
        return store.apply(batch).map(drop);
    }
    let mut hook = records::load(store, p, w)?;
    let hook_before = hook.clone();
    delivery.next_attempt_at = None;
    match answer {
        None => delivery.status = DeliveryStatus::Cancelled,
        Some(answer) => {
            delivery.attempts += 1;
            delivery.attempted_at = Some(now);
            let (code, error) = match answer {
                Answer::Status(code) => (Some(code), None),
                Answer::NoAnswer(e) => (None, Some(e)),
            };
            delivery.status_code = code;
            delivery.error = error;
            match code {
                Some(200..=299) => {
                    ctx.metrics.webhooks_delivered.add(1);
                    delivery.status = DeliveryStatus::Delivered;
                    if let Some(h) = hook.as_mut() {
                        h.failing_since = None;
                    }
                }
                Some(410) => {
                    ctx.metrics.webhooks_failed.add(1);
                    delivery.status = DeliveryStatus::Failed;
                    if let Some(h) = hook.as_mut() {
                        h.enabled = false;
                        h.disabled_reason = Some("the endpoint answered 410 Gone".into());
                    }
                }
                _ => {
                    let failing_since = hook
                        .as_mut()
                        .map(|h| *h.failing_since.get_or_insert(now))
                        .unwrap_or(now);
                    let hours = config.disable_after_hours as i64 * 3_600_000;
                    if config.disable_after_hours > 0 && now - failing_since >= hours {
                        if let Some(h) = hook.as_mut() {
                            h.enabled = false;
                            h.disabled_reason = Some(format!(
                                "every delivery failed for {} hours",
                                config.disable_after_hours
                            ));
                        }
                    }
                    match config.retry_seconds.get(delivery.attempts as usize - 1) {
                        Some(wait) => {
                            ctx.metrics.webhooks_retried.add(1);
                            let next = now + (*wait as i64) * 1000;
                            delivery.next_attempt_at = Some(next);
                            batch.put(keys::webhook_due(next, p, w, d), Vec::new());
                        }
                        None => {
                            ctx.metrics.webhooks_failed.add(1);
                            delivery.status = DeliveryStatus::Failed;
                        }
                    }
                }
            }
        }
    }
    if delivery.status != DeliveryStatus::Pending {
        // Only a delivery that will be tried again keeps its payload (a retry sends it
        // as it was first sent). One that is over keeps none: nothing reads it (the
        // list of deliveries shows no payload), its write is a third the size, and an
        // erasure finds nothing of the contact's in it.
        delivery.payload = String::new();
    }
    records::put_delivery(&mut batch, p, &delivery)?;
    // The endpoint's record is written only when this outcome changed it.
    let changed = hook.as_ref().filter(|_| hook != hook_before);
    if let Some(h) = changed {
        records::put(&mut batch, p, h)?;
    }
    store.apply(batch)?;
    if changed.is_some() {
        super::endpoints::Endpoints::of(ctx.states)?.forget();
    }
    Ok(())
}

/// Retries waiting for their attempt, every project's (for /metrics; the first
/// deliveries waiting are `WebhookWake::waiting`).
pub fn backlog(store: &dyn crate::store::Store) -> Result<u64> {
    let mut n = 0;
    for kv in store.scan(keys::WEBHOOK_DUE, None, false) {
        kv?;
        n += 1;
    }
    Ok(n)
}
