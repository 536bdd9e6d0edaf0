//! Handing a project over between two nodes of a cluster on PostgreSQL: each node has
//! its own store (a partial view of one schema) and registry, and takes the project
//! through the lease table, as the node layer does. What one node left waiting runs on
//! the node that took over, and a node that lost its lease without knowing it cannot
//! write (the fence) and lets the project go as soon as a write finds that out.
//!
//! Needs `MAILROOM_TEST_POSTGRES_URL` (`.ci/postgres.sh start`); without it each test
//! says so and passes.

use std::sync::Arc;
use std::time::Duration;

use super::common::{
    create_waiting_workflow, open_postgres_node, postgres_schema_url, signup, upsert, wait_for,
};
use crate::cluster::ownership::Ownership;
use crate::contact::actions::upsert as upsert_contact;
use crate::error::Error;
use crate::event::actions::track;
use crate::model::ProjectId;
use crate::project::{Registry, RegistryConfig};
use crate::scheduler::{Fire, Scheduler, Timer};
use crate::store::Store;
use crate::{AdjustableClock, Clock};
use actix::Actor;
use tokio::sync::mpsc;

const LEASE_SECONDS: u64 = 30;
const HOUR_MS: i64 = 3_600_000;

/// One node: its own partial view of the schema, a registry that owns nothing until
/// it acquires, and a Scheduler that reports each timer it fires.
struct Node {
    id: &'static str,
    store: Arc<dyn Store>,
    registry: Registry,
    fired: mpsc::UnboundedReceiver<Timer>,
}

impl Node {
    fn start(id: &'static str, url: &str, clock: &Arc<AdjustableClock>) -> Node {
        let store = open_postgres_node(url);
        let as_clock: Arc<dyn Clock> = clock.clone();
        let registry = Registry::with_ownership(
            store.clone(),
            as_clock.clone(),
            RegistryConfig::default(),
            super::common::links(),
            Ownership::none(),
            crate::wiring::hooks(),
        );
        let (tx, fired) = mpsc::unbounded_channel();
        let fire: Fire = Arc::new(move |t: Timer| {
            let _ = tx.send(t);
            Box::pin(async { Ok(()) })
        });
        Scheduler::new(registry.timers().clone(), store.clone(), as_clock, fire).start();
        Node {
            id,
            store,
            registry,
            fired,
        }
    }

    /// Takes `p`'s lease in the table (waiting while another node holds it), then the
    /// project itself; answers the epoch.
    async fn take(&self, p: ProjectId) -> u64 {
        let leases = self.store.cluster().expect("a cluster store");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let epoch = loop {
            if let Some(epoch) = leases.try_acquire(p, self.id, LEASE_SECONDS).await.unwrap() {
                break epoch;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} never got the lease",
                self.id
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        self.registry
            .acquire(p, epoch, Duration::from_secs(LEASE_SECONDS - 2))
            .await
            .unwrap();
        epoch
    }

    /// Hands `p` over: locally first, then in the table.
    async fn give_up(&self, p: ProjectId, epoch: u64) {
        self.registry.release(p).await.unwrap();
        let leases = self.store.cluster().unwrap();
        leases.release(p, self.id, epoch).await.unwrap();
    }
}

#[actix::test]
async fn a_delay_left_waiting_on_one_node_fires_on_the_node_that_took_the_lease() {
    let Some(url) = postgres_schema_url().await else {
        return;
    };
    let clock = Arc::new(AdjustableClock::default());
    let mut a = Node::start("a", &url, &clock);
    let mut b = Node::start("b", &url, &clock);
    let p = ProjectId::new();

    let epoch = a.take(p).await;
    let now = clock.now().timestamp_millis();
    create_waiting_workflow(&a.registry, p, now).await.unwrap();
    track(&a.registry, p, signup("one@example.com"))
        .await
        .unwrap();
    assert_eq!(a.registry.timers().len(), 1);
    assert!(
        b.store.scan(&[], None, false).all(|kv| {
            let (k, _) = kv.unwrap();
            !k.starts_with(b"timers/")
        }),
        "B holds nothing of a project it has not taken"
    );

    a.give_up(p, epoch).await;
    assert!(matches!(
        track(&a.registry, p, signup("two@example.com")).await,
        Err(Error::NotOwner { .. })
    ));
    let taken = b.take(p).await;
    assert_eq!(taken, epoch + 1, "a new epoch when the lease changes hands");
    assert_eq!(b.registry.timers().len(), 1, "B loaded the project's timer");
    let contacts = b.registry.contacts(p);
    contacts.ensure_loaded(&*b.store, p).unwrap();
    assert_eq!(contacts.len(), 1, "and its contact");

    clock.advance(2 * HOUR_MS);
    a.registry.timers().wake();
    b.registry.timers().wake();
    let t = tokio::time::timeout(Duration::from_secs(10), b.fired.recv())
        .await
        .expect("the delay fires on B")
        .unwrap();
    assert_eq!(t.project, p);
    assert!(a.fired.try_recv().is_err(), "not on A");
    track(&b.registry, p, signup("two@example.com"))
        .await
        .unwrap();
}

#[actix::test]
async fn a_node_that_lost_its_lease_unawares_cannot_write_and_lets_the_project_go() {
    let Some(url) = postgres_schema_url().await else {
        return;
    };
    let clock = Arc::new(AdjustableClock::default());
    let a = Node::start("a", &url, &clock);
    let b = Node::start("b", &url, &clock);
    let p = ProjectId::new();
    let leases = a.store.cluster().unwrap();

    // A takes the lease for one second and the project for longer than that, as a
    // node would whose renewals stopped reaching the database.
    let epoch = loop {
        if let Some(e) = leases.try_acquire(p, "a", 1).await.unwrap() {
            break e;
        }
    };
    a.registry
        .acquire(p, epoch, Duration::from_secs(3600))
        .await
        .unwrap();
    upsert_contact(&a.registry, p, upsert("kept@example.com"))
        .await
        .unwrap();

    // B takes over once the lease ran out.
    let epoch_b = b.take(p).await;
    upsert_contact(&b.registry, p, upsert("b@example.com"))
        .await
        .unwrap();

    // A still believes it owns the project: its write is refused by the fence...
    assert!(a.registry.ownership().owns(p));
    let refused = upsert_contact(&a.registry, p, upsert("lost@example.com")).await;
    assert!(
        refused.is_err(),
        "A's write after the takeover: {refused:?}"
    );
    // ...and A lets the project go.
    wait_for("A releases the project", Duration::from_secs(10), || {
        !a.registry.ownership().holds(p)
    })
    .await;
    assert!(matches!(
        upsert_contact(&a.registry, p, upsert("later@example.com")).await,
        Err(Error::NotOwner { .. })
    ));

    // What PostgreSQL holds (B loads the project afresh): A's write before the
    // takeover and B's, not A's after it.
    b.give_up(p, epoch_b).await;
    b.take(p).await;
    let table = b.registry.contacts(p);
    table.ensure_loaded(&*b.store, p).unwrap();
    let mut emails: Vec<String> = ["kept", "b", "lost"]
        .iter()
        .filter(|n| {
            table
                .by_email(&format!("{n}@example.com"))
                .unwrap()
                .is_some()
        })
        .map(|n| n.to_string())
        .collect();
    emails.sort();
    assert_eq!(emails, ["b", "kept"]);
}
