//! An email with a mailer while its project moves to another node: the mailer asks
//! whether its node still owns the project right before the SMTP transaction, so an
//! email held up by a slow relay past the lease is left to the new owner instead of
//! going out from both. Two engines over one store, each with its own dispatcher and
//! mailer, both speaking SMTP to one real relay on loopback (testkit) that can keep a
//! new connection waiting for its greeting.

use std::sync::Arc;
use std::time::Duration;

use super::common::{deliver_to, email_status, queue_email, trust_sender, wait_for};
use crate::cluster::ownership::Ownership;
use crate::mailer::Dispatcher;
use crate::model::{EmailStatus, ProjectId};
use crate::project::{Registry, RegistryConfig};
use crate::store::{SledStore, Store};
use crate::SystemClock;
use mailroom_testkit::smtp::SmtpServer;

const LEASE: Duration = Duration::from_secs(3600);
const LIMIT: Duration = Duration::from_secs(20);

/// One engine: a registry that owns nothing until it acquires, and a dispatcher with
/// one mailer speaking SMTP to `relay`.
struct Node {
    registry: Registry,
    _dispatcher: actix::Addr<Dispatcher>,
}

impl Node {
    fn start(store: &Arc<dyn Store>, relay: &SmtpServer) -> Node {
        let registry = Registry::with_ownership(
            store.clone(),
            Arc::new(SystemClock),
            RegistryConfig::default(),
            super::common::links(),
            Ownership::none(),
            crate::wiring::hooks(),
        );
        let dispatcher = deliver_to(&registry, relay);
        Node {
            registry,
            _dispatcher: dispatcher,
        }
    }

    async fn take(&self, p: ProjectId, epoch: u64) {
        self.registry.acquire(p, epoch, LEASE).await.unwrap();
    }

    fn owns(&self, p: ProjectId) -> bool {
        self.registry.ownership().owns(p)
    }
}

/// One email queued in `p` (a trusted sender domain first); its id.
async fn queue_one(node: &Node, p: ProjectId) -> crate::model::EmailId {
    trust_sender(&node.registry, p).await;
    queue_email(&node.registry, p, "reader@example.org").await
}

fn status(store: &Arc<dyn Store>, p: ProjectId, id: crate::model::EmailId) -> EmailStatus {
    email_status(&**store, p, id)
}

#[actix::test]
async fn an_email_whose_project_moves_while_the_relay_holds_it_is_sent_by_the_new_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
    let relay = SmtpServer::start();
    relay.hold_greeting(true);
    let (a, b) = (Node::start(&store, &relay), Node::start(&store, &relay));
    let p = ProjectId::new();
    a.take(p, 1).await;

    let id = queue_one(&a, p).await;
    wait_for("A's mailer waits for the relay's greeting", LIMIT, || {
        relay.held() == 1
    })
    .await;
    // A lets the project go while its mailer holds the email: the release waits for
    // that delivery to end, and from its first moment A no longer owns the project.
    let release = tokio::spawn({
        let registry = a.registry.clone();
        async move { registry.release(p).await }
    });
    wait_for("A no longer owns the project", LIMIT, || !a.owns(p)).await;
    relay.hold_greeting(false);
    tokio::time::timeout(LIMIT, release)
        .await
        .expect("the release ends once A's mailer gave the email back")
        .unwrap()
        .unwrap();
    assert_eq!(relay.count(), 0, "A sent nothing once it lost the project");
    assert_eq!(
        status(&store, p, id),
        EmailStatus::Queued,
        "and wrote no outcome: the email waits in the outbox"
    );

    b.take(p, 2).await;
    wait_for("B sends the email and records it", LIMIT, || {
        status(&store, p, id) == EmailStatus::Sent
    })
    .await;
    let got = relay.received();
    assert_eq!(got.len(), 1, "the reader got the email once");
    assert_eq!(got[0].rcpt_to, ["reader@example.org"]);
}

#[actix::test]
async fn an_email_held_by_the_relay_while_its_project_stays_put_is_sent_once() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
    let relay = SmtpServer::start();
    relay.hold_greeting(true);
    let a = Node::start(&store, &relay);
    let p = ProjectId::new();
    a.take(p, 1).await;

    let id = queue_one(&a, p).await;
    wait_for("A's mailer waits for the relay's greeting", LIMIT, || {
        relay.held() == 1
    })
    .await;
    relay.hold_greeting(false);
    wait_for("A sends the email and records it", LIMIT, || {
        status(&store, p, id) == EmailStatus::Sent
    })
    .await;
    assert_eq!(relay.count(), 1, "the reader got the email once");
}
