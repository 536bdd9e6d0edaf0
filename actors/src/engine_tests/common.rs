//! Set-up shared by the integration tests of handing projects over between engines
//! (handover.rs, handover_postgres.rs, handover_campaign.rs, handover_mailer.rs), of two
//! engines in one process (two_engines.rs) and of panics the supervisors contain
//! (panics.rs). Each includes it as `mod common;`; not every file uses every item.

use std::sync::Arc;
use std::time::Duration;

use crate::event::track::Track;
use crate::model::workflow::DelayUnit;
use crate::model::{
    DataPatch, EmailAddress, EmailId, EmailStatus, KeyKind, ProjectId, Step, StepKind, Workflow,
    WorkflowId,
};
use crate::project::apply::Apply;
use crate::project::Registry;
use crate::store::{PostgresConfig, PostgresStore, Store};
use crate::workflow::records as workflows;

/// A workflow that `signup` starts, whose first step waits an hour.
pub fn waiting_workflow(now: i64) -> Workflow {
    let step = |id: &str, kind, next: Option<&str>| Step {
        id: id.into(),
        kind,
        next: next.map(Into::into),
        yes: None,
        no: None,
        timeout_next: None,
    };
    Workflow {
        id: WorkflowId::new(),
        name: "welcome".into(),
        description: None,
        enabled: true,
        trigger_event: "signup".into(),
        allow_reentry: true,
        steps: vec![
            step(
                "wait",
                StepKind::Delay {
                    amount: 1,
                    unit: DelayUnit::Hours,
                },
                Some("end"),
            ),
            step("end", StepKind::Exit, None),
        ],
        created_at: now,
        updated_at: now,
    }
}

/// Creates a `waiting_workflow` in project `p` through `registry` (refused where the
/// registry does not own `p`).
pub async fn create_waiting_workflow(
    registry: &Registry,
    p: ProjectId,
    now: i64,
) -> crate::error::Result<Workflow> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, _| workflows::create(ctx, waiting_workflow(now))),
        )
        .await
}

/// The `signup` event for `email` (made a contact if it is not one yet).
pub fn signup(email: &str) -> Track {
    Track {
        email: EmailAddress::parse(email).unwrap(),
        subscribed: None,
        contact_data: DataPatch::default(),
        event: "signup".into(),
        event_data: Default::default(),
        idempotency: None,
        key: KeyKind::Secret,
    }
}

/// Links for an engine under test: a fixed key, pointing nowhere that answers.
pub fn links() -> crate::links::Links {
    crate::links::Links::new([7; 32], "http://127.0.0.1:9", false, 60)
}

/// The same, as an engine's config takes them.
pub fn links_config() -> crate::engine::LinksConfig {
    crate::engine::LinksConfig {
        base_url: "http://127.0.0.1:9".into(),
        tracking: false,
        unsubscribe_valid_days: 60,
        sender_id: "test".into(),
    }
}

/// An engine on a sled store in `dir`, with the system clock, the default config and
/// every feature's hooks: it owns every project.
pub fn sled_engine(dir: &tempfile::TempDir) -> Registry {
    let store: Arc<dyn Store> = crate::store::SledStore::open(dir.path(), 8 << 20).unwrap();
    Registry::new(
        store,
        Arc::new(crate::SystemClock),
        crate::project::RegistryConfig::default(),
        links(),
        crate::wiring::hooks(),
    )
}

/// An upsert of `email` with no data, subscribed if it is new.
pub fn upsert(email: &str) -> crate::contact::records::UpsertContact {
    crate::contact::records::UpsertContact {
        email: EmailAddress::parse(email).unwrap(),
        subscribed: None,
        default_subscribed: true,
        data: DataPatch::default(),
    }
}

/// Polls `done` until it holds, failing past `limit`.
pub async fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The URL of a fresh schema of its own for this test on the server at
/// `MAILROOM_TEST_POSTGRES_URL`, or None (the test skipped, saying so) without it.
pub async fn postgres_schema_url() -> Option<String> {
    let Ok(admin) = std::env::var("MAILROOM_TEST_POSTGRES_URL") else {
        mailroom_testkit::skipped("MAILROOM_TEST_POSTGRES_URL is not set");
        return None;
    };
    let schema = format!("handover_{}", uuid::Uuid::now_v7().simple());
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("connect to MAILROOM_TEST_POSTGRES_URL");
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    let sep = if admin.contains('?') { '&' } else { '?' };
    Some(format!("{admin}{sep}options=-c%20search_path%3D{schema}"))
}

/// One node's store on the schema at `url`: a partial view, as each node of a cluster
/// on PostgreSQL has.
pub fn open_postgres_node(url: &str) -> Arc<dyn Store> {
    PostgresStore::open(&PostgresConfig {
        url: url.to_owned(),
        pool_size: 2,
        lock_wait_ms: 5_000,
        statement_timeout_ms: 5_000,
        partial: true,
        tls: Default::default(),
        ca_file: None,
    })
    .unwrap()
}

/// A dispatcher and one mailer for `registry`, speaking SMTP to `relay` (unpaced,
/// retrying after 10 ms), with the registry's test faults.
pub fn deliver_to(
    registry: &Registry,
    relay: &mailroom_testkit::smtp::SmtpServer,
) -> actix::Addr<crate::mailer::Dispatcher> {
    use crate::mailer::{Dispatcher, DispatcherConfig, MailerActor, SmtpSecurity, TransportConfig};
    let store = registry.store().clone();
    let mailer = MailerActor::new(
        TransportConfig::Smtp {
            host: "127.0.0.1".into(),
            port: relay.port(),
            security: SmtpSecurity::None,
            credentials: None,
            pool_size: 1,
            // Longer than any greeting a test holds back.
            timeout: Duration::from_secs(60),
        },
        registry.metrics().clone(),
    )
    .with_faults(registry.faults().clone());
    let mailer = actix::Supervisor::start(move |_| mailer);
    let dispatcher = Dispatcher::new(
        store.clone(),
        registry.clock().clone(),
        registry.clone(),
        vec![mailer],
        crate::mailer::dkim::lookup(store),
        DispatcherConfig {
            rate_per_second: 0,
            max_attempts: 3,
            retry_base_ms: 10,
            max_in_flight: 4,
        },
    );
    // Supervised, as the server starts them: one that panics is started again.
    actix::Supervisor::start(move |_| dispatcher)
}

/// Trusts example.com as a sender domain of `p` (once per project).
pub async fn trust_sender(registry: &Registry, p: ProjectId) {
    let name = crate::domain::DomainName::parse("example.com").unwrap();
    crate::domain::actions::trust(registry, p, name)
        .await
        .unwrap();
}

/// One email from news@example.com to `to`, queued through the send use case; its id.
pub async fn queue_email(registry: &Registry, p: ProjectId, to: &str) -> EmailId {
    use crate::email::actions::{send_request, SendRequest};
    let cache = Arc::new(crate::render::TemplateCache::new(Default::default()));
    let request = SendRequest {
        recipients: vec![(EmailAddress::parse(to).unwrap(), None)],
        template: None,
        subject: Some("Hello".into()),
        body: Some("<p>Hello</p>".into()),
        text: None,
        from: Some((EmailAddress::parse("news@example.com").unwrap(), None)),
        from_name: None,
        reply_to: None,
        subscribed: Some(true),
        data: Default::default(),
        headers: Vec::new(),
        attachments: Vec::new(),
        idempotency: None,
        execution: None,
    };
    let receipt = send_request(registry, &cache, p, request).await.unwrap();
    receipt.emails[0].email_id.expect("queued")
}

/// The status of email `id` of `p` in `store`.
pub fn email_status(store: &dyn Store, p: ProjectId, id: EmailId) -> EmailStatus {
    crate::email::sending::load_email(store, p, id)
        .unwrap()
        .expect("the email")
        .status
}
