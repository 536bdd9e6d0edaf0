//! Two engines in one process, each with its own store, clock and limits, as two
//! `Application`s (or two tests) would be: neither sees the other's timers, limits or
//! counts.

use std::sync::Arc;
use std::time::Duration;

use super::common::{create_waiting_workflow, signup};
use crate::event::actions::track;
use crate::metrics::ExecutionMove;
use crate::model::{ProjectId, Workflow};
use crate::project::{Registry, RegistryConfig};
use crate::scheduler::{Fire, Scheduler, Timer};
use crate::store::{SledStore, Store};
use crate::{AdjustableClock, Clock};
use actix::Actor;
use tokio::sync::mpsc;

struct Engine {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    clock: Arc<AdjustableClock>,
    registry: Registry,
    fired: mpsc::UnboundedReceiver<Timer>,
    project: ProjectId,
}

impl Engine {
    /// A registry on its own store and clock, its Scheduler reporting what fires.
    fn start(config: RegistryConfig) -> Engine {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
        let clock = Arc::new(AdjustableClock::default());
        let registry = Registry::new(
            store.clone(),
            clock.clone(),
            config,
            super::common::links(),
            crate::wiring::hooks(),
        );
        let (tx, fired) = mpsc::unbounded_channel();
        let fire: Fire = Arc::new(move |t: Timer| {
            let _ = tx.send(t);
            Box::pin(async { Ok(()) })
        });
        let as_clock: Arc<dyn Clock> = clock.clone();
        Scheduler::new(registry.timers().clone(), store.clone(), as_clock, fire).start();
        Engine {
            _dir: dir,
            store,
            clock,
            registry,
            fired,
            project: ProjectId::new(),
        }
    }

    /// A workflow that `signup` starts, whose first step waits an hour.
    async fn add_waiting_workflow(&self) {
        self.try_add_waiting_workflow().await.unwrap();
    }

    async fn try_add_waiting_workflow(&self) -> crate::error::Result<Workflow> {
        let now = self.clock.now().timestamp_millis();
        create_waiting_workflow(&self.registry, self.project, now).await
    }

    async fn signup(&self, email: &str) {
        track(&self.registry, self.project, signup(email))
            .await
            .unwrap();
    }

    fn started(&self) -> u64 {
        self.registry.metrics().executions(ExecutionMove::Started)
    }
}

#[actix::test]
async fn two_engines_in_one_process_keep_their_own_clocks_timers_limits_and_counts() {
    let mut a = Engine::start(RegistryConfig {
        tenant: crate::project::TenantLimits {
            max_workflows: 1,
            ..Default::default()
        },
        templates: crate::render::Limits {
            max_output_bytes: 64,
            ..Default::default()
        },
        ..Default::default()
    });
    let mut b = Engine::start(RegistryConfig::default());
    for e in [&a, &b] {
        e.add_waiting_workflow().await;
    }
    a.signup("one@example.com").await;
    a.signup("two@example.com").await;
    b.signup("one@example.com").await;

    // Each write answered once durable, and its timer was armed then, in its engine.
    assert_eq!(a.registry.timers().len(), 2);
    assert_eq!(b.registry.timers().len(), 1);
    assert_eq!((a.started(), b.started()), (2, 1), "each counts its own");
    assert!(a.store.batches_applied() > b.store.batches_applied());

    // Moving one clock past the timers fires that engine's timers only.
    a.clock.advance(2 * 3_600_000);
    a.registry.timers().wake();
    for _ in 0..2 {
        let t = tokio::time::timeout(Duration::from_secs(10), a.fired.recv())
            .await
            .expect("engine A's timers fire once its clock moved")
            .unwrap();
        assert_eq!(t.project, a.project);
    }
    assert!(a.registry.timers().is_empty());
    assert!(b.fired.try_recv().is_err(), "engine B's clock did not move");
    assert_eq!(b.registry.timers().len(), 1);

    // A limit set in one does not apply in the other.
    let body = "{% for i in range(end=20) %}<p>{{ i }}</p>{% endfor %}".to_owned();
    let (tight, roomy) = (a.registry.renders(), b.registry.renders());
    assert!(tight.compile("s".into(), body.clone()).await.is_err());
    assert!(roomy.compile("s".into(), body).await.is_ok());
    assert!(
        a.try_add_waiting_workflow().await.is_err(),
        "A holds one workflow at most"
    );
    assert!(b.try_add_waiting_workflow().await.is_ok());
}
