//! The WorkflowExecutor pool: `workers` supervised actors that run executions step by
//! step (`workflows.executors`).
//!
//! Work comes from the ready queue in the store (`keys::READY`): an execution goes in
//! when it starts (in the batch of the event that triggered it), when its timer falls
//! due, and when the event it waits for comes. A feeder reads the queue's durable
//! entries and hands each execution to one worker at a time; a worker runs its steps
//! until it waits or ends. Each step's effect and the execution's move are written by
//! the project's actor, guarded by the step the execution is at, so a step that runs
//! again after a crash moves it once; a SEND_EMAIL step sends with an idempotency key of
//! (execution, step), so it sends once too. A clean stop parks an execution between two
//! steps (see `shutdown`); its queue entry stays, and the next start runs it on.
//!
//! In a cluster only the executions of projects this node owns run here: the feeder
//! hands out no other, and a worker asks `owns(p)` before each step, so an execution
//! whose project was handed over stops between two steps and runs on at its new owner.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::{
    Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Supervised, Supervisor, WrapFuture,
};
use serde_json::{json, Map, Value};

use super::webhook::WebhookClient;
use crate::email::actions::{send_request, SendRequest};
use crate::error::{Error, Result};
use crate::idempotency::Claim;
use crate::model::{
    DataPatch, ExecStatus, Execution, ExecutionId, ProjectId, Step, StepKind, Wait, Workflow,
};
use crate::project::apply::Apply;
use crate::project::events::contact_stats;
use crate::project::Registry;
use crate::render::TemplateCache;
use crate::scheduler::Timer;
use crate::segment::{Compiled, Condition, ContactSubject};
use crate::shutdown::Work;
use crate::store::keys;
use crate::workflow::executions;
use crate::workflow::records::{self as workflows, Bounds, StepEnd};

#[derive(Debug, Clone, Copy)]
pub struct ExecutorConfig {
    pub workers: usize,
    pub bounds: Bounds,
}

/// How long an idempotency record of a SEND_EMAIL step is kept.
const SEND_KEY_TTL_MS: i64 = 30 * 86_400_000;
/// Steps one worker runs of one execution before it lets others go first.
const STEPS_PER_TURN: usize = 100;
/// How often the feeder reads the whole ready queue.
const FULL_SCAN: Duration = Duration::from_secs(1);
/// The longest an execution whose step keeps panicking waits before it runs again.
const PANIC_BACKOFF_MAX: Duration = Duration::from_secs(60);

pub struct Executors {
    registry: Registry,
    cache: Arc<TemplateCache>,
    webhooks: WebhookClient,
    config: ExecutorConfig,
    claimed: Mutex<HashSet<(ProjectId, ExecutionId)>>,
    /// Rung when a worker is done with an execution.
    free: tokio::sync::Notify,
    /// Executions whose step panicked, and how often in a row: each panic holds the
    /// execution back longer before it runs again.
    panics: Mutex<HashMap<(ProjectId, ExecutionId), u32>>,
    /// The pool's actors, held so that their supervisors may restart them.
    workers: std::sync::OnceLock<Vec<actix::Addr<Worker>>>,
}

type Job = (ProjectId, ExecutionId);

/// One executor of the pool: a supervised actor that runs one execution at a time. A
/// step that fails for a passing reason runs again shortly; a step that panics stops
/// the actor, and its supervisor restarts it (`restarting`): the execution it held is
/// handed back to the queue, after a backoff, and runs on from its stored step.
struct Worker {
    executors: Arc<Executors>,
    jobs: Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Job>>>,
    /// The execution being run, for the restart to hand back.
    current: Arc<Mutex<Option<Job>>>,
}

impl Actor for Worker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.next(ctx);
    }
}

impl Supervised for Worker {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        let job = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        tracing::warn!(job = ?job, "a workflow executor restarts after a panic");
        if let Some((p, x)) = job {
            self.executors.after_panic(p, x);
        }
    }
}

impl Worker {
    /// Takes the next execution and runs its turn, then the next one.
    fn next(&mut self, ctx: &mut Context<Self>) {
        let (me, jobs, current) = (
            self.executors.clone(),
            self.jobs.clone(),
            self.current.clone(),
        );
        let turn = async move {
            let (p, x) = jobs.lock().await.recv().await?;
            *current.lock().unwrap_or_else(|p| p.into_inner()) = Some((p, x));
            let run = std::panic::AssertUnwindSafe(me.run(p, x));
            let ran = futures_util::FutureExt::catch_unwind(run).await;
            let ran = match ran {
                Ok(Ok(again)) => {
                    me.panics().remove(&(p, x));
                    again
                }
                // The project moved to another node: it runs on there.
                Ok(Err(Error::NotOwner { .. })) => false,
                Ok(Err(e)) => {
                    tracing::warn!(project = %p, execution = %x, error = %e, "a workflow step failed for a passing reason; it runs again shortly");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    true
                }
                // The claim stays with `current`, for `restarting` to hand back.
                Err(_) => return Some(Err(())),
            };
            current.lock().unwrap_or_else(|p| p.into_inner()).take();
            me.claimed().remove(&(p, x));
            if ran {
                me.requeue(p, x);
            } else {
                // A worker is free: the feeder may hand out what waits.
                me.free.notify_one();
            }
            Some(Ok(()))
        };
        ctx.spawn(turn.into_actor(self).map(|turn, act, ctx| match turn {
            Some(Ok(())) => act.next(ctx),
            Some(Err(())) => {
                tracing::error!("a workflow step panicked; its executor restarts");
                ctx.stop();
            }
            // The feeder is gone (the system stops): nothing more comes.
            None => {}
        }));
    }
}

impl Executors {
    /// Starts the feeder and the workers.
    pub fn start(
        registry: Registry,
        cache: Arc<TemplateCache>,
        webhooks: WebhookClient,
        config: ExecutorConfig,
    ) -> Arc<Self> {
        let me = Arc::new(Executors {
            registry,
            cache,
            webhooks,
            config,
            claimed: Mutex::new(HashSet::new()),
            free: tokio::sync::Notify::new(),
            panics: Mutex::default(),
            workers: std::sync::OnceLock::new(),
        });
        let (tx, rx) = tokio::sync::mpsc::channel::<(ProjectId, ExecutionId)>(1024);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let workers = (0..config.workers.max(1))
            .map(|_| {
                let (me, jobs) = (me.clone(), rx.clone());
                Supervisor::start(move |_| Worker {
                    executors: me,
                    jobs,
                    current: Arc::default(),
                })
            })
            .collect();
        // A supervisor restarts its actor only while someone holds its address.
        let _ = me.workers.set(workers);
        let feeder = me.clone();
        actix::spawn(async move { feeder.feed(tx).await });
        me
    }

    /// Workers one project may hold at once.
    fn per_project(&self) -> usize {
        self.config.workers.saturating_sub(1).max(1)
    }

    fn claimed(&self) -> std::sync::MutexGuard<'_, HashSet<(ProjectId, ExecutionId)>> {
        self.claimed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn panics(&self) -> std::sync::MutexGuard<'_, HashMap<Job, u32>> {
        self.panics.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands an execution whose step panicked back to the queue: after a second, then
    /// twice as long at each panic in a row, up to `PANIC_BACKOFF_MAX`, so a step that
    /// always panics neither spins nor holds a worker.
    fn after_panic(self: &Arc<Self>, p: ProjectId, x: ExecutionId) {
        let n = {
            let mut panics = self.panics();
            let n = panics.entry((p, x)).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let wait = crate::backoff::doubling(Duration::from_secs(1), n, PANIC_BACKOFF_MAX);
        let me = self.clone();
        actix::spawn(async move {
            tokio::time::sleep(wait).await;
            me.claimed().remove(&(p, x));
            me.requeue(p, x);
        });
    }

    /// Hands the durable entries of the ready queue to the workers, one worker per
    /// execution at a time. What was just queued is noted (`Ready::hint`),
    /// so after an event the feeder checks those few entries; the whole queue is read
    /// at start-up and then every `FULL_SCAN`, for anything a note missed. Ready
    /// executions wait in a queue per project, served round robin, and one project may
    /// hold all workers but one: a tenant with slow webhooks cannot stall the others.
    async fn feed(&self, tx: tokio::sync::mpsc::Sender<(ProjectId, ExecutionId)>) {
        let store = self.registry.store().clone();
        // Noted entries not yet durable.
        let mut unsure: Vec<(ProjectId, ExecutionId)> = Vec::new();
        let mut waiting: BTreeMap<ProjectId, VecDeque<ExecutionId>> = BTreeMap::new();
        let mut known: HashSet<(ProjectId, ExecutionId)> = HashSet::new();
        let mut last_full: Option<std::time::Instant> = None;
        let mut turn: Option<ProjectId> = None;
        loop {
            let mut found = Vec::new();
            if last_full.is_none_or(|t| t.elapsed() >= FULL_SCAN) {
                last_full = Some(std::time::Instant::now());
                found.extend(
                    store
                        .scan_durable(keys::READY, None)
                        .filter_map(|kv| kv.ok().and_then(|(k, _)| keys::parse_ready(&k))),
                );
            }
            unsure.extend(self.registry.wakeups().ready().take());
            unsure.retain(|&(p, x)| {
                let key = keys::ready(p, x);
                match store.scan_durable(&key, None).next() {
                    Some(Ok(_)) => {
                        found.push((p, x));
                        false
                    }
                    // Still there but not yet durable: look again shortly.
                    _ => store.get(&key).ok().flatten().is_some(),
                }
            });
            // Another node's executions (a project handed over) are its own to run.
            let ownership = self.registry.ownership();
            waiting.retain(|p, q| {
                let owned = ownership.owns(*p);
                if !owned {
                    for x in q.iter() {
                        known.remove(&(*p, *x));
                    }
                }
                owned
            });
            for job in found {
                if !ownership.owns(job.0) {
                    continue;
                }
                if !self.claimed().contains(&job) && known.insert(job) {
                    waiting.entry(job.0).or_default().push_back(job.1);
                }
            }
            // Round robin: each pass starts after the project served first last time.
            let cap = self.per_project();
            let projects: Vec<ProjectId> = match turn {
                Some(t) => waiting
                    .range((std::ops::Bound::Excluded(t), std::ops::Bound::Unbounded))
                    .chain(waiting.range(..=t))
                    .map(|(p, _)| *p)
                    .collect(),
                None => waiting.keys().copied().collect(),
            };
            let mut progress = true;
            while progress {
                progress = false;
                for p in &projects {
                    let busy = self.claimed().iter().filter(|(q, _)| q == p).count();
                    // A disabled project's executions wait until it is enabled.
                    if busy >= cap || crate::directory::is_disabled(&*store, *p) {
                        continue;
                    }
                    let Some(x) = waiting.get_mut(p).and_then(VecDeque::pop_front) else {
                        continue;
                    };
                    known.remove(&(*p, x));
                    turn = Some(*p);
                    if self.claimed().insert((*p, x)) {
                        if tx.send((*p, x)).await.is_err() {
                            return;
                        }
                        progress = true;
                    }
                }
            }
            waiting.retain(|_, q| !q.is_empty());
            let nap = if unsure.is_empty() {
                FULL_SCAN
            } else {
                Duration::from_millis(10)
            };
            tokio::select! {
                _ = self.registry.wakeups().ready().notified() => {
                    // What rang it becomes durable within a flush interval.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ = self.free.notified() => {}
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }
}

/// The execution a workflow timer is for.
fn x_of(t: &Timer) -> ExecutionId {
    keys::id_after(&t.target, b"").unwrap_or_default()
}

impl Executors {
    /// A waiting execution's timer fell due.
    pub async fn fire(&self, t: Timer) -> Result<()> {
        let bounds = self.config.bounds;
        let moved = self
            .registry
            .send(
                t.project,
                Apply::durable(move |ctx, _| workflows::timer_fired(ctx, t, bounds)),
            )
            .await?;
        if moved {
            self.registry
                .wakeups()
                .ready()
                .hint(&[(t.project, x_of(&t))]);
        }
        Ok(())
    }

    fn requeue(&self, p: ProjectId, x: ExecutionId) {
        self.registry.wakeups().ready().hint(&[(p, x)]);
    }

    fn now(&self) -> i64 {
        self.registry.clock().now().timestamp_millis()
    }

    /// Runs an execution's steps until it waits or ends (or has had its turn).
    async fn run(&self, p: ProjectId, x: ExecutionId) -> Result<bool> {
        let store = self.registry.store().clone();
        for _ in 0..STEPS_PER_TURN {
            let Some(_step) = self.registry.drain().enter(Work::Workflow) else {
                return Ok(false);
            };
            if !self.registry.ownership().owns(p) {
                return Err(Error::NotOwner { project: p });
            }
            let e = executions::load(&*store, p, x)?;
            let Some(e) = e.filter(|e| e.status == ExecStatus::Running) else {
                // Stale: it waits, ended, or is gone. Its queue entry goes.
                self.unqueue(p, x).await?;
                return Ok(false);
            };
            let step_id = e.current.clone().unwrap_or_default();
            let workflow = workflows::load(&*store, p, e.workflow_id)?;
            let Some((w, step)) = workflow.and_then(|w| {
                let step = w.step(&step_id).cloned()?;
                Some((w, step))
            }) else {
                let end = self.end(&step_id, "EXIT", Err("its workflow or step is gone".into()));
                self.done(p, x, end).await?;
                return Ok(false);
            };
            let Some(next) = self.step(p, &w, &e, &step).await? else {
                return Ok(false);
            };
            if next.status != ExecStatus::Running {
                return Ok(false);
            }
            if matches!(step.kind, StepKind::Webhook { .. }) {
                // A slow step ends the turn: the rest waits its turn in the queue.
                return Ok(true);
            }
        }
        // Its turn is over; it goes on after the others.
        Ok(true)
    }

    async fn unqueue(&self, p: ProjectId, x: ExecutionId) -> Result<()> {
        self.registry
            .send(
                p,
                Apply::applied(move |ctx, _| {
                    let still = executions::load(ctx.store, ctx.project, x)?
                        .is_some_and(|e| e.status == ExecStatus::Running);
                    if !still {
                        let mut batch = crate::store::Batch::new();
                        batch.delete(keys::ready(ctx.project, x));
                        ctx.store.apply(batch)?;
                    }
                    Ok(())
                }),
            )
            .await
    }

    /// A step's end: COMPLETED and on to `next`, or FAILED with the reason.
    fn end(
        &self,
        step: &str,
        kind: &str,
        result: std::result::Result<Option<String>, String>,
    ) -> StepEnd {
        let now = self.now();
        match result {
            Ok(next) => StepEnd {
                step: step.to_owned(),
                entry: executions::entry(step, kind, "COMPLETED", now),
                next: Ok(next),
            },
            Err(why) => {
                let mut entry = executions::entry(step, kind, "FAILED", now);
                entry.error = Some(why);
                StepEnd {
                    step: step.to_owned(),
                    entry,
                    next: Err(ExecStatus::Failed),
                }
            }
        }
    }

    async fn done(&self, p: ProjectId, x: ExecutionId, end: StepEnd) -> Result<Option<Execution>> {
        let bounds = self.config.bounds;
        self.registry
            .send(
                p,
                Apply::durable(move |ctx, _| workflows::step_done(ctx, x, end, bounds)),
            )
            .await
    }

    async fn wait(
        &self,
        p: ProjectId,
        x: ExecutionId,
        step: &str,
        wait: Wait,
    ) -> Result<Option<Execution>> {
        let step = step.to_owned();
        self.registry
            .send(
                p,
                Apply::durable(move |ctx, _| workflows::wait(ctx, x, &step, wait)),
            )
            .await?;
        Ok(None)
    }

    /// Runs one step; answers the execution after it, or None when it now waits (or
    /// was moved by someone else).
    async fn step(
        &self,
        p: ProjectId,
        w: &Workflow,
        e: &Execution,
        step: &Step,
    ) -> Result<Option<Execution>> {
        let (x, kind) = (e.id, step.kind.type_name());
        let now = self.now();
        // The steps below read the contact from the project's table, which the actor
        // of a project this node just took may not have read yet: a contact not found
        // there would fail the step as deleted.
        self.registry.loaded_contacts(p).await?;
        match &step.kind {
            StepKind::SendEmail { template_id } => {
                let result = self.send(p, e, step, *template_id).await?;
                self.registry
                    .faults()
                    .hit(crate::faults::Point::WorkflowStep);
                self.done(
                    p,
                    x,
                    self.end(&step.id, kind, result.map(|()| step.next.clone())),
                )
                .await
            }
            StepKind::Delay { amount, unit } => {
                let due = now.saturating_add((*amount as i64).saturating_mul(unit.millis()));
                let wait = Wait {
                    due,
                    event: None,
                    next: step.next.clone(),
                    timeout_next: None,
                };
                self.wait(p, x, &step.id, wait).await
            }
            StepKind::WaitForEvent {
                event_name,
                timeout_seconds,
            } => {
                let due = now.saturating_add((*timeout_seconds as i64).saturating_mul(1_000));
                let wait = Wait {
                    due,
                    event: Some(event_name.clone()),
                    next: step.next.clone(),
                    timeout_next: step.timeout_next.clone(),
                };
                self.wait(p, x, &step.id, wait).await
            }
            StepKind::Condition { condition } => {
                let end = match self.condition(p, e, condition) {
                    Ok(yes) => {
                        let mut end = self.end(
                            &step.id,
                            kind,
                            Ok(if yes {
                                step.yes.clone()
                            } else {
                                step.no.clone()
                            }),
                        );
                        end.entry.branch = Some(if yes { "yes" } else { "no" }.into());
                        end
                    }
                    Err(why) => self.end(&step.id, kind, Err(why)),
                };
                self.done(p, x, end).await
            }
            StepKind::UpdateContact { data, subscribed } => {
                let patch = match data
                    .as_deref()
                    .map(serde_json::from_str::<Map<String, Value>>)
                {
                    Some(Ok(map)) => DataPatch::new(map),
                    Some(Err(_)) | None => DataPatch::default(),
                };
                let end = self.end(&step.id, kind, Ok(step.next.clone()));
                let (subscribed, bounds) = (*subscribed, self.config.bounds);
                self.registry
                    .send(
                        p,
                        Apply::durable(move |ctx, counts| {
                            workflows::update_contact(
                                ctx, counts, x, end, patch, subscribed, bounds,
                            )
                        }),
                    )
                    .await
            }
            StepKind::Webhook {
                url,
                method,
                headers,
                body,
            } => {
                let payload = self.webhook_body(p, w, e, step, body.as_deref())?;
                // An id per (execution, step): a receiver can tell a repeat after a
                // crash (a webhook is called at least once) from a new call.
                let mut headers = headers.clone();
                headers.push((
                    "X-Mailroom-Delivery".into(),
                    format!("{}:{}", e.id, step.id),
                ));
                let answer = self.webhooks.call(url, method, &headers, payload).await;
                let code = answer.as_ref().ok().copied();
                let mut end = match answer {
                    Ok(code) if (200..300).contains(&code) => {
                        self.end(&step.id, kind, Ok(step.next.clone()))
                    }
                    Ok(code) => {
                        self.end(&step.id, kind, Err(format!("the webhook answered {code}")))
                    }
                    Err(why) => {
                        tracing::info!(project = %p, execution = %x, step = %step.id,
                            cause = %why.detail(), "a webhook got no answer");
                        self.end(&step.id, kind, Err(crate::error::chain(&why)))
                    }
                };
                end.entry.status_code = code;
                self.done(p, x, end).await
            }
            StepKind::Exit => {
                let mut end = self.end(&step.id, kind, Ok(None));
                end.next = Err(ExecStatus::Exited);
                self.done(p, x, end).await
            }
        }
    }

    /// SEND_EMAIL through the /v1/send path. `Err` is a failure that may pass (run the
    /// step again); `Ok(Err(why))` one that will not (the step FAILS).
    async fn send(
        &self,
        p: ProjectId,
        e: &Execution,
        step: &Step,
        template: crate::model::TemplateId,
    ) -> Result<std::result::Result<(), String>> {
        let Some(contact) = self.registry.contacts(p).get(e.contact_id)? else {
            return Ok(Err("the contact was deleted".into()));
        };
        let key = format!("{}:{}", e.id, step.id);
        let req = SendRequest {
            recipients: vec![(contact.email, None)],
            template: Some(template),
            subject: None,
            body: None,
            text: None,
            from: None,
            from_name: None,
            reply_to: None,
            subscribed: None,
            data: Map::new(),
            // Complaints about it are told apart by workflow (a mailbox provider's loop).
            headers: self.registry.links().list_headers(
                p,
                "workflow",
                &e.workflow_id.to_string(),
                false,
            ),
            attachments: Vec::new(),
            idempotency: Some(Claim::new("workflow", &key, &json!({}), SEND_KEY_TTL_MS)),
            execution: Some(e.id),
        };
        match send_request(&self.registry, &self.cache, p, req).await {
            Ok(_) => Ok(Ok(())),
            // Passing: full, failing, or the project moved to another node (where the
            // step runs again under the same idempotency key).
            Err(
                e @ (Error::Busy { .. }
                | Error::Storage(_)
                | Error::Internal(_)
                | Error::NotOwner { .. }),
            ) => Err(e),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// CONDITION: the segment filter language on the contact as it is now.
    fn condition(
        &self,
        p: ProjectId,
        e: &Execution,
        text: &str,
    ) -> std::result::Result<bool, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("stored condition: {e}"))?;
        let c = Condition::parse(&v, "config")
            .map_err(|_| "the condition does not parse".to_owned())?;
        let compiled = Compiled::condition(&c);
        let store = self.registry.store();
        let contact = self
            .registry
            .contacts(p)
            .get(e.contact_id)
            .map_err(|e| e.to_string())?
            .ok_or("the contact was deleted")?;
        let stats = contact_stats(&**store, p, contact.id, compiled.event_names())
            .map_err(|e| e.to_string())?;
        let subject = ContactSubject::new(&compiled, &contact, &stats);
        Ok(compiled.matches(&subject, self.now()))
    }

    /// What a WEBHOOK sends: the workflow, the execution, the contact, and the step's
    /// `body`.
    fn webhook_body(
        &self,
        p: ProjectId,
        w: &Workflow,
        e: &Execution,
        step: &Step,
        body: Option<&str>,
    ) -> Result<Vec<u8>> {
        let contact = self.registry.contacts(p).get(e.contact_id)?;
        let contact = contact.map_or(Value::Null, |c| {
            json!({"id": c.id.to_string(), "email": c.email.to_string(),
                   "subscribed": c.subscribed, "data": c.data})
        });
        let body = body
            .and_then(|b| serde_json::from_str::<Value>(b).ok())
            .unwrap_or(Value::Null);
        let payload = json!({
            "workflow": {"id": w.id.to_string(), "name": w.name},
            "execution": {"id": e.id.to_string(), "stepId": step.id},
            "contact": contact,
            "body": body,
        });
        serde_json::to_vec(&payload).map_err(|e| Error::Internal(e.to_string()))
    }
}
