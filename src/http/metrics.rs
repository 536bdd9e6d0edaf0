//! Prometheus metrics: requests by route, method and status, a latency histogram by
//! route, and the depths of the project actors' mailboxes.
//!
//! Every label takes a bounded set of values, since anyone can send requests: routes
//! are the registered patterns (or "unmatched"), methods outside the standard ones fold
//! into "OTHER", statuses are those the server answers. Project ids are not labels:
//! mailboxes are reported as the deepest and the sum, with the number of actors.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::web;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

use super::AppState;

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    mailbox: IntGaugeVec,
    relay_faults: prometheus::IntCounter,
    /// One render at a time: the relay-fault counter catches up by a difference.
    rendering: std::sync::Mutex<()>,
}

impl Metrics {
    pub fn new() -> Self {
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
        let relay_faults = prometheus::IntCounter::new(
            "mailroom_relay_faults_total",
            "Deliveries the relay refused for reasons of ours (login, sender, DATA), retried",
        )
        .expect("valid metric");
        for c in [
            Box::new(relay_faults.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(requests.clone()),
            Box::new(latency.clone()),
            Box::new(mailbox.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Metrics {
            registry,
            requests,
            latency,
            mailbox,
            relay_faults,
            rendering: std::sync::Mutex::new(()),
        }
    }

    pub fn render(&self, state: &AppState) -> String {
        let depths = state.registry.mailbox_depths();
        let deepest = depths.iter().map(|(_, d)| *d).max().unwrap_or(0);
        let total: usize = depths.iter().map(|(_, d)| *d).sum();
        for (stat, value) in [("max", deepest), ("total", total), ("actors", depths.len())] {
            self.mailbox
                .with_label_values(&["project", stat])
                .set(value as i64);
        }
        let _one = self.rendering.lock().unwrap_or_else(|p| p.into_inner());
        let faults = state.registry.relay_faults();
        self.relay_faults
            .inc_by(faults.saturating_sub(self.relay_faults.get()));
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
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
