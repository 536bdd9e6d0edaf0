//! Set-up shared by the integration tests of handing projects over between engines
//! (handover.rs, handover_postgres.rs, handover_campaign.rs) and of two engines in one
//! process (two_engines.rs). Each includes it as `mod common;`; not every file uses
//! every item.

use std::sync::Arc;
use std::time::Duration;

use mailroom_actors::event::track::Track;
use mailroom_actors::model::workflow::DelayUnit;
use mailroom_actors::model::{
    DataPatch, EmailAddress, KeyKind, ProjectId, Step, StepKind, Workflow, WorkflowId,
};
use mailroom_actors::project::apply::Apply;
use mailroom_actors::project::Registry;
use mailroom_actors::store::{PostgresConfig, PostgresStore, Store};
use mailroom_actors::workflow::records as workflows;

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
) -> mailroom_actors::error::Result<Workflow> {
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
        eprintln!("skipped: MAILROOM_TEST_POSTGRES_URL is not set");
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
    })
    .unwrap()
}
