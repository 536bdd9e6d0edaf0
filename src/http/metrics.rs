//! Prometheus metrics: requests by route, method and status, a latency histogram by
//! route, the depths of the project actors' mailboxes, and what an operator alerts on:
//! emails queued, sent, failed, bounced and cancelled, the outbox's depth and the age
//! of its oldest email, campaigns sending, workflow executions by what happened to
//! them, timers pending, relay faults by class, and the verifier's DNS cache.
//!
//! Every label takes a bounded set of values, since anyone can send requests: routes
//! are the registered patterns (or "unmatched"), methods outside the standard ones fold
//! into "OTHER", statuses are those the server answers, fault classes and execution
//! moves are the engine's fixed enums. Project and campaign ids are never labels:
//! mailboxes are reported as the deepest and the sum, with the number of actors.
//!
//! The outbox and the sending campaigns are counted by scanning their keys, at most
//! once per `metrics.scan_interval_ms`, so a scraper that calls in a loop costs one
//! scan per interval, not one per call.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::web;
use mailroom_actors::engine::ops::{ExecutionMove, Metrics as Engine, RelayFault, RetentionKind};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::state::AppState;

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    mailbox: IntGaugeVec,
    /// Counters the engine keeps, each caught up with its engine count on render.
    counted: Vec<(IntCounter, Count)>,
    relay_faults: IntCounterVec,
    webhook_deliveries: IntCounterVec,
    webhook_backlog: IntGauge,
    feedback: IntCounterVec,
    executions: IntCounterVec,
    retention_removed: IntCounterVec,
    outbox_depth: IntGauge,
    /// Projects whose rolling rates pass the campaign pause thresholds (no per-project
    /// label: a project id is not for everyone who can read /metrics).
    reputation_over: IntGaugeVec,
    outbox_oldest: IntGauge,
    campaigns_sending: IntGauge,
    timers_pending: IntGauge,
    leases_held: IntGauge,
    scan_interval: Duration,
    /// One render at a time (the counters catch up by a difference), and when the
    /// store was last scanned.
    rendering: Mutex<Option<Instant>>,
}

/// Reads one of the engine's counts.
type Count = fn(&AppState) -> u64;

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("valid metric")
}

/// Adds what the engine counted since the last render.
fn catch_up(c: &IntCounter, engine_total: u64) {
    c.inc_by(engine_total.saturating_sub(c.get()));
}

impl Metrics {
    pub fn new(scan_interval: Duration) -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "mailroom_http_requests_total",
                "HTTP requests by route, method and status",
            ),
            &["route", "method", "status"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "mailroom_http_request_duration_seconds",
                "HTTP request latency by route",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            &["route"],
        )
        .expect("valid metric");
        let mailbox = IntGaugeVec::new(
            Opts::new(
                "mailroom_mailbox_depth",
                "Messages waiting for or in a project actor",
            ),
            &["actor", "stat"],
        )
        .expect("valid metric");
        let counted: Vec<(IntCounter, Count)> = vec![
            (
                counter(
                    "mailroom_cluster_forwards_total",
                    "Requests this node passed to the node that owns their project",
                ),
                |s| s.cluster.as_ref().map_or(0, |c| c.metrics.forwards.load(std::sync::atomic::Ordering::Relaxed)),
            ),
            (
                counter(
                    "mailroom_cluster_lease_moves_total",
                    "Project leases this node took, handed over or lost",
                ),
                |s| s.cluster.as_ref().map_or(0, |c| c.metrics.lease_moves.load(std::sync::atomic::Ordering::Relaxed)),
            ),
            (
                counter(
                    "mailroom_emails_queued_total",
                    "Emails written to the outbox",
                ),
                |s| s.engine.ops().metrics().emails_queued.get(),
            ),
            (
                counter("mailroom_emails_sent_total", "Emails the relay accepted"),
                |s| s.engine.ops().metrics().emails_sent.get(),
            ),
            (
                counter(
                    "mailroom_emails_failed_total",
                    "Emails given up (past sending.max_attempts, or refused for their content)",
                ),
                |s| s.engine.ops().metrics().emails_failed.get(),
            ),
            (
                counter(
                    "mailroom_emails_bounced_total",
                    "Emails the recipient's side refused for good",
                ),
                |s| s.engine.ops().metrics().emails_bounced.get(),
            ),
            (
                counter(
                    "mailroom_emails_cancelled_total",
                    "Emails a campaign's cancel took out of the outbox",
                ),
                |s| s.engine.ops().metrics().emails_cancelled.get(),
            ),
            (
                counter(
                    "mailroom_store_batches_total",
                    "Atomic batches the store applied (one per write: a send, a bounce, an unsubscribe)",
                ),
                |s| s.engine.ops().batches_applied(),
            ),
            (
                counter(
                    "mailroom_emails_rendered_total",
                    "Emails rendered for a send, a campaign or a workflow step",
                ),
                |s| s.engine.ops().metrics().emails_rendered.get(),
            ),
            (
                counter(
                    "mailroom_dns_cache_hits_total",
                    "Address verifications answered from the DNS cache",
                ),
                |s| s.engine.ops().metrics().dns_cache_hits.get(),
            ),
            (
                counter(
                    "mailroom_dns_cache_misses_total",
                    "Address verifications that asked DNS",
                ),
                |s| s.engine.ops().metrics().dns_cache_misses.get(),
            ),
        ];
        let relay_faults = IntCounterVec::new(
            Opts::new(
                "mailroom_relay_faults_total",
                "Delivery attempts that did not reach the recipient's answer, by class; retried or failed, never a bounce",
            ),
            &["class"],
        )
        .expect("valid metric");
        let webhook_deliveries = IntCounterVec::new(
            Opts::new(
                "mailroom_webhook_deliveries_total",
                "Event webhook delivery attempts, by outcome: delivered (2xx), retried, failed (for good, or a 410)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        for o in ["delivered", "retried", "failed"] {
            webhook_deliveries.with_label_values(&[o]);
        }
        let feedback = IntCounterVec::new(
            Opts::new(
                "mailroom_feedback_total",
                "Reports from relays and mailbox providers (return-path mail and callbacks), by outcome: hard, soft, complaint (applied), other (not a report: an auto-reply, dropped), quarantined (unreadable, kept)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        for o in ["hard", "soft", "complaint", "other", "quarantined"] {
            feedback.with_label_values(&[o]);
        }
        let webhook_backlog = gauge(
            "mailroom_webhook_backlog",
            "Event webhook deliveries waiting for an attempt",
        );
        let executions = IntCounterVec::new(
            Opts::new(
                "mailroom_workflow_executions_total",
                "Workflow executions started, and ended by final status",
            ),
            &["status"],
        )
        .expect("valid metric");
        let retention_removed = IntCounterVec::new(
            Opts::new(
                "mailroom_retention_removed_total",
                "Records the retention purge removed, by kind (retention.*)",
            ),
            &["kind"],
        )
        .expect("valid metric");
        // Every label value from the start, so a rate() sees the first increase.
        for k in RetentionKind::ALL {
            retention_removed.with_label_values(&[k.as_str()]);
        }
        for f in RelayFault::ALL {
            relay_faults.with_label_values(&[f.as_str()]);
        }
        for m in ExecutionMove::ALL {
            executions.with_label_values(&[m.as_str()]);
        }
        let outbox_depth = gauge("mailroom_outbox_depth", "Emails waiting in the outbox");
        let reputation_over = IntGaugeVec::new(
            Opts::new(
                "mailroom_projects_over_rate",
                "Projects whose rolling bounce or complaint rate (GET /stats) passes campaigns.pause_bounce_rate or campaigns.pause_complaint_rate",
            ),
            &["rate"],
        )
        .expect("valid metric");
        for r in ["bounce", "complaint"] {
            reputation_over.with_label_values(&[r]);
        }
        let outbox_oldest = gauge(
            "mailroom_outbox_oldest_age_seconds",
            "How long the oldest email in the outbox has waited since it was queued (0 when empty)",
        );
        let campaigns_sending = gauge(
            "mailroom_campaigns_sending",
            "Campaigns SENDING (queueing, or waiting for their outbox to drain)",
        );
        let timers_pending = gauge(
            "mailroom_timers_pending",
            "Durable timers armed (scheduled campaigns, workflow waits)",
        );
        let leases_held = gauge(
            "mailroom_cluster_leases_held",
            "Projects this node owns now (0 on sled, where no leases are held)",
        );
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(leases_held.clone()),
            Box::new(requests.clone()),
            Box::new(latency.clone()),
            Box::new(mailbox.clone()),
            Box::new(relay_faults.clone()),
            Box::new(webhook_deliveries.clone()),
            Box::new(webhook_backlog.clone()),
            Box::new(feedback.clone()),
            Box::new(executions.clone()),
            Box::new(retention_removed.clone()),
            Box::new(outbox_depth.clone()),
            Box::new(reputation_over.clone()),
            Box::new(outbox_oldest.clone()),
            Box::new(campaigns_sending.clone()),
            Box::new(timers_pending.clone()),
        ];
        for (c, _) in &counted {
            collectors.push(Box::new(c.clone()));
        }
        for c in collectors {
            registry.register(c).expect("metric registered once");
        }
        Metrics {
            registry,
            requests,
            latency,
            mailbox,
            counted,
            relay_faults,
            webhook_deliveries,
            feedback,
            webhook_backlog,
            executions,
            retention_removed,
            outbox_depth,
            reputation_over,
            outbox_oldest,
            campaigns_sending,
            timers_pending,
            leases_held,
            scan_interval,
            rendering: Mutex::new(None),
        }
    }

    /// The text of every metric. Blocking: it may scan the store, so it runs off the
    /// HTTP workers.
    pub fn render(&self, state: &AppState) -> String {
        let depths = state.engine.ops().mailbox_depths();
        let deepest = depths.iter().map(|(_, d)| *d).max().unwrap_or(0);
        let total: usize = depths.iter().map(|(_, d)| *d).sum();
        for (stat, value) in [("max", deepest), ("total", total), ("actors", depths.len())] {
            self.mailbox
                .with_label_values(&["project", stat])
                .set(value as i64);
        }
        let mut scanned = self.rendering.lock().unwrap_or_else(|p| p.into_inner());
        for (c, count) in &self.counted {
            catch_up(c, count(state));
        }
        let engine: &Engine = state.engine.ops().metrics();
        for f in RelayFault::ALL {
            catch_up(
                &self.relay_faults.with_label_values(&[f.as_str()]),
                engine.relay_faults(f),
            );
        }
        for (outcome, n) in [
            ("delivered", engine.webhooks_delivered.get()),
            ("retried", engine.webhooks_retried.get()),
            ("failed", engine.webhooks_failed.get()),
        ] {
            catch_up(&self.webhook_deliveries.with_label_values(&[outcome]), n);
        }
        for (outcome, n) in [
            ("hard", engine.feedback_hard.get()),
            ("soft", engine.feedback_soft.get()),
            ("complaint", engine.feedback_complaint.get()),
            ("other", engine.feedback_other.get()),
            ("quarantined", engine.feedback_quarantined.get()),
        ] {
            catch_up(&self.feedback.with_label_values(&[outcome]), n);
        }
        for m in ExecutionMove::ALL {
            catch_up(
                &self.executions.with_label_values(&[m.as_str()]),
                engine.executions(m),
            );
        }
        for k in RetentionKind::ALL {
            catch_up(
                &self.retention_removed.with_label_values(&[k.as_str()]),
                engine.removed_total(k as usize),
            );
        }
        self.timers_pending
            .set(state.engine.ops().timers_pending() as i64);
        self.leases_held
            .set(state.cluster.as_ref().map_or(0, |c| c.leases_held()) as i64);
        if scanned.is_none_or(|at| at.elapsed() >= self.scan_interval) {
            self.scan(state);
            *scanned = Some(Instant::now());
        }
        drop(scanned);
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// The gauges that come from the store's keys; a failed read leaves a gauge as it was.
    fn scan(&self, state: &AppState) {
        let now = state.engine.clock().now().timestamp_millis();
        match state.engine.ops().outbox_depth() {
            Ok(d) => {
                self.outbox_depth.set(d.emails as i64);
                let age = d.oldest_ms.map_or(0, |t| (now - t).max(0) / 1_000);
                self.outbox_oldest.set(age);
            }
            Err(e) => tracing::warn!(error = %e, "counting the outbox for /metrics"),
        }
        match state.engine.ops().webhook_backlog() {
            // Retries waiting in the queue, and first deliveries the loop saw waiting.
            Ok(n) => self.webhook_backlog.set(n as i64),
            Err(e) => tracing::warn!(error = %e, "counting webhook deliveries for /metrics"),
        }
        match state
            .engine
            .ops()
            .over_rates(state.pause_rates.0, state.pause_rates.1)
        {
            Ok((bounce, complaint)) => {
                self.reputation_over
                    .with_label_values(&["bounce"])
                    .set(bounce as i64);
                self.reputation_over
                    .with_label_values(&["complaint"])
                    .set(complaint as i64);
            }
            Err(e) => tracing::warn!(error = %e, "reading projects' rates for /metrics"),
        }
        match state.engine.campaigns().sending_count() {
            Ok(n) => self.campaigns_sending.set(n as i64),
            Err(e) => tracing::warn!(error = %e, "counting sending campaigns for /metrics"),
        }
    }
}

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let start = Instant::now();
    let res = next.call(req).await?;
    if let Some(state) = res.request().app_data::<web::Data<AppState>>() {
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".into());
        let method = method_label(res.request().method());
        let status = res.status().as_u16().to_string();
        let m = &state.metrics;
        m.requests
            .with_label_values(&[&route, method, &status])
            .inc();
        m.latency
            .with_label_values(&[&route])
            .observe(start.elapsed().as_secs_f64());
    }
    Ok(res)
}

/// The method as a label: the standard ones by name, anything else as "OTHER".
fn method_label(m: &actix_web::http::Method) -> &'static str {
    use actix_web::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}
