//! A panic in the dispatcher, a mailer, the Scheduler or a project's actor is contained:
//! the caller gets an answer, the supervisor restarts what panicked from the store, and
//! the work still completes exactly once. Each test arms one fault point of the engine
//! (`faults.rs`, debug builds only) and checks that the fault fired.

use std::sync::Arc;
use std::time::Duration;

use super::common::{
    create_waiting_workflow, deliver_to, email_status, queue_email, sled_engine, trust_sender,
    upsert, wait_for,
};
use crate::contact::actions::upsert as upsert_contact;
use crate::email::sending::load_email;
use crate::error::Error;
use crate::faults::{Faults, Point};
use crate::mailer::Dispatcher;
use crate::model::{EmailStatus, OutboundEmail, ProjectId};
use crate::project::messages::Generation;
use crate::project::Registry;
use crate::scheduler::{Fire, Scheduler, Timer, TimerKind, Timers};
use crate::store::{Batch, SledStore, Store};
use crate::{AdjustableClock, Clock};
use actix::{Addr, Supervisor};
use mailroom_testkit::smtp::SmtpServer;
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(20);
/// Far apart next to the real time a test takes (the test clock runs on from it).
const HOUR_MS: i64 = 3_600_000;

/// An engine on sled that owns every project, with delivery to `relay`; the
/// dispatcher's address is kept by the caller (a supervisor restarts an actor only
/// while someone can still reach it).
fn engine(dir: &tempfile::TempDir, relay: &SmtpServer) -> (Registry, Addr<Dispatcher>) {
    let registry = sled_engine(dir);
    let dispatcher = deliver_to(&registry, relay);
    (registry, dispatcher)
}

/// Sends an email to `to` and waits until its SENT is recorded; the email as stored.
async fn send_and_wait(registry: &Registry, p: ProjectId, to: &str) -> OutboundEmail {
    let id = queue_email(registry, p, to).await;
    wait_for(&format!("the email to {to} is SENT"), LIMIT, || {
        email_status(&**registry.store(), p, id) == EmailStatus::Sent
    })
    .await;
    load_email(&**registry.store(), p, id).unwrap().unwrap()
}

/// How many messages the relay accepted for `to`.
fn copies(relay: &SmtpServer, to: &str) -> usize {
    relay
        .received()
        .iter()
        .filter(|m| m.rcpt_to.iter().any(|r| r == to))
        .count()
}

/// The email of a round whose dispatcher panicked as it handed the email out goes once
/// the supervisor restarted the dispatcher, and the dispatcher keeps working.
#[actix::test]
async fn an_email_whose_dispatcher_panicked_is_delivered_once() {
    let (dir, relay) = (tempfile::tempdir().unwrap(), SmtpServer::start());
    let (registry, _dispatcher) = engine(&dir, &relay);
    let p = ProjectId::new();
    trust_sender(&registry, p).await;
    registry.faults().arm(Point::DispatcherRound);

    send_and_wait(&registry, p, "ada@example.org").await;
    assert!(
        !registry.faults().is_armed(Point::DispatcherRound),
        "the dispatcher panicked"
    );
    send_and_wait(&registry, p, "control@example.org").await;
    assert_eq!(copies(&relay, "ada@example.org"), 1, "exactly one copy");
    assert_eq!(relay.count(), 2, "and nothing else");
}

/// A mailer that panicked as it took an email (on its own thread, so the actor's task
/// ended) answers a failure worth another try and restarts: the email goes once, and
/// the one mailer there is sends what comes after.
#[actix::test]
async fn an_email_whose_mailer_panicked_before_the_relay_had_it_is_delivered_once() {
    let (dir, relay) = (tempfile::tempdir().unwrap(), SmtpServer::start());
    let (registry, _dispatcher) = engine(&dir, &relay);
    let p = ProjectId::new();
    trust_sender(&registry, p).await;
    registry.faults().arm(Point::MailerSend);

    let ada = send_and_wait(&registry, p, "ada@example.org").await;
    assert!(
        !registry.faults().is_armed(Point::MailerSend),
        "the mailer panicked"
    );
    assert_eq!(
        ada.attempts, 2,
        "the first attempt was the one that panicked"
    );
    send_and_wait(&registry, p, "control@example.org").await;
    assert_eq!(copies(&relay, "ada@example.org"), 1, "exactly one copy");
    assert_eq!(relay.count(), 2, "and nothing else");
}

/// A mailer that panicked once its SMTP transaction had begun cannot know whether the
/// relay took the email: the email fails, never goes twice, and the restarted mailer
/// sends what comes after.
#[actix::test]
async fn an_email_whose_mailer_panicked_in_the_smtp_transaction_fails_and_is_not_sent_again() {
    let (dir, relay) = (tempfile::tempdir().unwrap(), SmtpServer::start());
    let (registry, _dispatcher) = engine(&dir, &relay);
    let p = ProjectId::new();
    trust_sender(&registry, p).await;
    registry.faults().arm(Point::MailerTransaction);

    let id = queue_email(&registry, p, "ada@example.org").await;
    wait_for("the email to ada is FAILED", LIMIT, || {
        email_status(&**registry.store(), p, id) == EmailStatus::Failed
    })
    .await;
    let ada = load_email(&**registry.store(), p, id).unwrap().unwrap();
    assert_eq!(
        (ada.attempts, ada.last_error.as_deref()),
        (1, Some("the mailer failed during the SMTP transaction")),
        "failed at its first attempt, saying why"
    );
    send_and_wait(&registry, p, "control@example.org").await;
    assert_eq!(copies(&relay, "ada@example.org"), 0, "not sent again");
    assert_eq!(relay.count(), 1, "only the control email went");
}

/// A write whose handler panicked answers an internal error (never hangs), the actor
/// restarts from the store, the earlier data is intact and the next writes work, a
/// closure write (`Apply`) too.
#[actix::test]
async fn a_write_whose_project_actor_panicked_fails_once_and_the_next_one_works() {
    let dir = tempfile::tempdir().unwrap();
    let registry = sled_engine(&dir);
    let clock = registry.clock().clone();
    let p = ProjectId::new();
    upsert_contact(&registry, p, upsert("before@example.com"))
        .await
        .unwrap();
    let first = registry.call(p, Generation).await.unwrap();
    registry.faults().arm(Point::ProjectWrite);

    let failed = tokio::time::timeout(
        LIMIT,
        upsert_contact(&registry, p, upsert("lost@example.com")),
    )
    .await
    .expect("the caller gets an answer");
    assert!(
        matches!(failed, Err(Error::Internal(_))),
        "an internal error: {failed:?}"
    );
    upsert_contact(&registry, p, upsert("after@example.com"))
        .await
        .unwrap();
    let now = clock.now().timestamp_millis();
    create_waiting_workflow(&registry, p, now).await.unwrap();
    assert_eq!(
        registry.call(p, Generation).await.unwrap(),
        first + 1,
        "the actor was restarted once"
    );
    let table = registry.loaded_contacts(p).await.unwrap();
    let present = |e: &str| table.by_email(e).unwrap().is_some();
    assert!(present("before@example.com"), "the earlier data is intact");
    assert!(present("after@example.com"), "the next write landed");
    assert!(
        !present("lost@example.com"),
        "the write that panicked changed nothing"
    );
}

/// A write that panics every time does not reload its project once per request: the
/// fourth restart in a row waits (800 ms) before it loads the project again, and then
/// the project works.
#[actix::test]
async fn a_project_whose_writes_keep_panicking_waits_longer_before_each_reload() {
    let dir = tempfile::tempdir().unwrap();
    let registry = sled_engine(&dir);
    let p = ProjectId::new();
    upsert_contact(&registry, p, upsert("before@example.com"))
        .await
        .unwrap();
    let first = registry.call(p, Generation).await.unwrap();
    // The fourth restart's wait begins at its panic, before the failed call returns:
    // the time is taken before that call, so it holds the whole wait.
    let mut started = None;
    for n in 1..=4 {
        started = Some(std::time::Instant::now());
        registry.faults().arm(Point::ProjectWrite);
        let failed = tokio::time::timeout(
            LIMIT,
            upsert_contact(&registry, p, upsert(&format!("lost{n}@example.com"))),
        )
        .await
        .expect("the caller gets an answer");
        assert!(
            matches!(failed, Err(Error::Internal(_))),
            "panic {n}: {failed:?}"
        );
    }
    upsert_contact(&registry, p, upsert("after@example.com"))
        .await
        .unwrap();
    let took = started.expect("four calls").elapsed();
    assert!(
        took >= Duration::from_millis(800),
        "the fourth restart in a row waited before its reload: {took:?}"
    );
    assert_eq!(
        registry.call(p, Generation).await.unwrap(),
        first + 4,
        "one reload per panic, no more"
    );
}

/// The Scheduler that panicked with due timers taken out of memory restarts, arms them
/// again from the store, and each fires once.
#[actix::test]
async fn a_timer_taken_by_a_scheduler_that_panicked_still_fires_once() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
    let clock = Arc::new(AdjustableClock::default());
    let timers = Arc::new(Timers::default());
    let faults = Arc::new(Faults::default());
    faults.arm(Point::SchedulerFire);
    let (tx, mut fired) = mpsc::unbounded_channel();
    // As a timer's owner does: the key goes in the batch of the work it started.
    let fire: Fire = {
        let store = store.clone();
        Arc::new(move |t: Timer| {
            let (store, tx) = (store.clone(), tx.clone());
            Box::pin(async move {
                let mut done = Batch::new();
                done.delete(t.key());
                store.apply(done)?;
                store.durable().await?;
                let _ = tx.send(t);
                Ok(())
            })
        })
    };
    let scheduler = {
        let (timers, store, faults) = (timers.clone(), store.clone(), faults.clone());
        let clock: Arc<dyn Clock> = clock.clone();
        Supervisor::start(move |_| Scheduler::new(timers, store, clock, fire).with_faults(faults))
    };
    let now = clock.now().timestamp_millis();
    let timer = |due, target| Timer {
        due,
        kind: TimerKind::Workflow,
        project: ProjectId::new(),
        target: [target; 16],
    };
    let (first, control) = (timer(now + HOUR_MS, 1), timer(now + 2 * HOUR_MS, 2));
    for t in [first, control] {
        let mut batch = Batch::new();
        batch.put(t.key(), Vec::new());
        store.apply(batch).unwrap();
        store.durable().await.unwrap();
        timers.arm(t);
    }

    clock.advance(HOUR_MS);
    timers.wake();
    let got = tokio::time::timeout(LIMIT, fired.recv())
        .await
        .expect("the timer fires after the restart")
        .unwrap();
    assert_eq!(got, first);
    assert!(
        !faults.is_armed(Point::SchedulerFire),
        "the scheduler panicked"
    );
    clock.advance(HOUR_MS);
    timers.wake();
    let got = tokio::time::timeout(LIMIT, fired.recv())
        .await
        .expect("the next timer fires")
        .unwrap();
    assert_eq!(got, control, "and the first did not fire twice");
    drop(scheduler);
}
