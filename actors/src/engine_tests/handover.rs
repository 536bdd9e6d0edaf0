//! A project handed from one engine to another, as leases move between cluster nodes:
//! two registries over ONE store, each owning nothing until it acquires. What one
//! engine started (a workflow waiting on a delay) completes on the engine that took the
//! project over, once, and nothing of the project runs on the engine that let it go.

use std::sync::Arc;
use std::time::Duration;

use super::common::{create_waiting_workflow, signup, wait_for};
use crate::cluster::ownership::Ownership;
use crate::dns::{DnsConfig, Resolver};
use crate::error::Error;
use crate::event::actions::track;
use crate::metrics::ExecutionMove;
use crate::model::{ExecStatus, ProjectId};
use crate::project::{Registry, RegistryConfig};
use crate::render::TemplateCache;
use crate::scheduler::{Fire, Scheduler, Timer};
use crate::store::{SledStore, Store};
use crate::workflow::records as workflows;
use crate::workflow::{Executors, WebhookClient};
use crate::{AdjustableClock, Clock};
use actix::Actor;
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(3600);
const HOUR_MS: i64 = 3_600_000;

/// One node: a registry that owns nothing until it acquires, its Scheduler (which
/// reports each timer it fires, then hands it to the executors) and its executors.
struct Node {
    registry: Registry,
    fired: mpsc::UnboundedReceiver<Timer>,
}

impl Node {
    fn start(store: &Arc<dyn Store>, clock: &Arc<AdjustableClock>) -> Node {
        let as_clock: Arc<dyn Clock> = clock.clone();
        let registry = Registry::with_ownership(
            store.clone(),
            as_clock.clone(),
            RegistryConfig::default(),
            super::common::links(),
            Ownership::none(),
            crate::wiring::hooks(),
        );
        let resolver = Resolver::new(&DnsConfig {
            nameservers: vec!["127.0.0.1:9".parse().unwrap()],
            timeout: Duration::from_millis(100),
            cache_size: 16,
        })
        .unwrap();
        let executors = Executors::start(
            registry.clone(),
            Arc::new(TemplateCache::new(Default::default())),
            WebhookClient::new(resolver, false, Duration::from_secs(1)),
            crate::workflow::ExecutorConfig {
                workers: 2,
                bounds: workflows::Bounds {
                    max_history: 100,
                    max_finished: 1_000,
                },
            },
        );
        let (tx, fired) = mpsc::unbounded_channel();
        let fire: Fire = Arc::new(move |t: Timer| {
            let _ = tx.send(t);
            let executors = executors.clone();
            Box::pin(async move { executors.fire(t).await })
        });
        Scheduler::new(registry.timers().clone(), store.clone(), as_clock, fire).start();
        Node { registry, fired }
    }

    fn ended(&self) -> u64 {
        self.registry
            .metrics()
            .executions(ExecutionMove::Ended(ExecStatus::Exited))
    }
}

#[actix::test]
async fn a_workflow_waiting_on_a_delay_completes_once_on_the_node_that_took_its_project_over() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
    let clock = Arc::new(AdjustableClock::default());
    let mut a = Node::start(&store, &clock);
    let mut b = Node::start(&store, &clock);
    let p = ProjectId::new();

    // Neither node serves a project it has not acquired.
    let now = clock.now().timestamp_millis();
    let refused = create_waiting_workflow(&a.registry, p, now).await;
    assert!(matches!(refused, Err(Error::NotOwner { project }) if project == p));

    a.registry.acquire(p, 1, LEASE).await.unwrap();
    assert!(a.registry.ownership().owns(p));
    assert_eq!(a.registry.ownership().owned(), vec![(p, 1)]);
    create_waiting_workflow(&a.registry, p, now).await.unwrap();
    track(&a.registry, p, signup("one@example.com"))
        .await
        .unwrap();
    track(&a.registry, p, signup("two@example.com"))
        .await
        .unwrap();
    assert!(matches!(
        track(&b.registry, p, signup("three@example.com")).await,
        Err(Error::NotOwner { .. })
    ));
    wait_for(
        "both executions wait on their delay",
        Duration::from_secs(10),
        || a.registry.timers().len() == 2,
    )
    .await;

    // A hands the project over; B takes it with the next epoch.
    a.registry.release(p).await.unwrap();
    assert!(!a.registry.ownership().owns(p) && !a.registry.ownership().holds(p));
    assert!(
        a.registry.timers().is_empty(),
        "A forgot the project's timers"
    );
    assert!(matches!(
        track(&a.registry, p, signup("three@example.com")).await,
        Err(Error::NotOwner { .. })
    ));
    b.registry.acquire(p, 2, LEASE).await.unwrap();
    assert_eq!(
        b.registry.timers().len(),
        2,
        "B loaded the project's timers"
    );

    // The hour passes on both: the delays fire on B, and the executions end there.
    clock.advance(2 * HOUR_MS);
    a.registry.timers().wake();
    b.registry.timers().wake();
    wait_for("both executions end on B", Duration::from_secs(10), || {
        b.ended() == 2
    })
    .await;
    for _ in 0..2 {
        let t = b.fired.try_recv().expect("B fired the delays");
        assert_eq!(t.project, p);
    }
    assert!(b.fired.try_recv().is_err(), "each delay fired once");
    assert!(
        a.fired.try_recv().is_err(),
        "nothing of the project fired on A"
    );
    assert_eq!(a.ended(), 0, "no execution ran on A");

    // B's writes land, and a signup through B starts a new execution there.
    track(&b.registry, p, signup("three@example.com"))
        .await
        .unwrap();
    assert_eq!(b.registry.metrics().executions(ExecutionMove::Started), 1);
}

#[actix::test]
async fn a_timer_armed_before_a_release_does_not_fire_on_the_node_that_let_the_project_go() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
    let clock = Arc::new(AdjustableClock::default());
    let mut a = Node::start(&store, &clock);
    let (p, q) = (ProjectId::new(), ProjectId::new());
    let now = clock.now().timestamp_millis();
    for project in [p, q] {
        a.registry.acquire(project, 7, LEASE).await.unwrap();
        create_waiting_workflow(&a.registry, project, now)
            .await
            .unwrap();
        track(&a.registry, project, signup("one@example.com"))
            .await
            .unwrap();
    }
    wait_for(
        "both projects' executions wait",
        Duration::from_secs(10),
        || a.registry.timers().len() == 2,
    )
    .await;
    let timers_of_p: Vec<Timer> = store
        .scan(crate::store::keys::TIMERS, None, false)
        .filter_map(|kv| Timer::parse(&kv.unwrap().0))
        .filter(|t| t.project == p)
        .collect();
    assert_eq!(timers_of_p.len(), 1);
    a.registry.release(p).await.unwrap();
    // Armed again behind the release's back (a late flush): still not fired here.
    for t in timers_of_p {
        a.registry.timers().arm(t);
    }
    clock.advance(2 * HOUR_MS);
    a.registry.timers().wake();
    // The project A kept fires; by then the released one's timer fell due too.
    wait_for(
        "the kept project's execution ends",
        Duration::from_secs(10),
        || a.ended() == 1,
    )
    .await;
    let fired: Vec<ProjectId> = std::iter::from_fn(|| a.fired.try_recv().ok())
        .map(|t| t.project)
        .collect();
    assert_eq!(fired, vec![q], "only the kept project's timer fired");
    assert!(a.registry.timers().is_empty());
}
