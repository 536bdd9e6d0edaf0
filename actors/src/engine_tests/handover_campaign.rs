//! A campaign in the middle of sending, handed from one engine to another as a lease
//! moves: two registries over ONE store, each with its own dispatcher writing the
//! emails it sends into a directory of its own. Every recipient gets one email: those
//! sent before the hand-over from the first engine, the rest from the second. On sled
//! (one store under both) and on PostgreSQL (each its own view, leases and fences;
//! skipped without `MAILROOM_TEST_POSTGRES_URL`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::common::{open_postgres_node, postgres_schema_url};
use crate::campaign::audience;
use crate::campaign::records as campaigns;
use crate::campaign::{AudienceKind, CampaignStatus, Campaigns, NewCampaign, RunnerConfig};
use crate::cluster::ownership::Ownership;
use crate::contact::records::UpsertContact;
use crate::domain::DomainName;
use crate::engine::{Engine, EngineConfig};
use crate::error::Error;
use crate::mailer::{DispatcherConfig, TransportConfig};
use crate::model::{DataPatch, EmailAddress, ProjectId};
use crate::project::Registry;
use crate::store::{SledStore, Store};
use crate::SystemClock;

const RECIPIENTS: usize = 300;
const LEASE: Duration = Duration::from_secs(3600);

struct Node {
    id: &'static str,
    store: Arc<dyn Store>,
    registry: Registry,
    campaigns: Arc<Campaigns>,
    out: PathBuf,
    _engine: Engine,
}

impl Node {
    /// An engine as the server starts one (`Engine::start`), serving no project until it
    /// takes one, writing the emails it sends into `out`.
    fn start(id: &'static str, store: Arc<dyn Store>, out: PathBuf) -> Node {
        let config = EngineConfig {
            mailers: 2,
            dispatcher: DispatcherConfig {
                // Paced, so that the campaign is still sending when it is handed over.
                rate_per_second: 100,
                max_attempts: 3,
                retry_base_ms: 10,
                max_in_flight: 16,
            },
            campaigns: RunnerConfig {
                batch_size: 20,
                queue_ahead: 40,
                progress_every: Duration::from_secs(60),
                runners: 1,
                pause: Default::default(),
            },
            ..EngineConfig::new(
                TransportConfig::File { dir: out.clone() },
                super::common::links_config(),
            )
        };
        let engine = Engine::start(
            config,
            store.clone(),
            Arc::new(SystemClock),
            Ownership::none(),
        )
        .expect("the engine starts");
        Node {
            id,
            store,
            registry: engine.registry().clone(),
            campaigns: engine.runners().clone(),
            out,
            _engine: engine,
        }
    }

    /// Takes `p`: its lease first when the store has a lease table (waiting while
    /// another node holds it), then the project.
    async fn take(&self, p: ProjectId) {
        let epoch = match self.store.cluster() {
            None => 1,
            Some(leases) => loop {
                let lease = leases.try_acquire(p, self.id, LEASE.as_secs()).await;
                if let Some(epoch) = lease.unwrap() {
                    break epoch;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            },
        };
        self.registry.acquire(p, epoch, LEASE).await.unwrap();
    }

    /// Hands `p` over: here first, then in the lease table.
    async fn give_up(&self, p: ProjectId) {
        let epoch = self.registry.ownership().epoch(p).expect("held");
        self.registry.release(p).await.unwrap();
        if let Some(leases) = self.store.cluster() {
            leases.release(p, self.id, epoch).await.unwrap();
        }
    }

    /// The recipient of each email this node wrote out.
    fn recipients(&self) -> Vec<String> {
        recipients_in(&self.out)
    }
}

fn recipients_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "eml"))
        // A file still being written has no header yet: it counts once written (every
        // file is, by the time its email's outcome is recorded).
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            text.lines()
                .find_map(|l| l.strip_prefix("To: "))
                .map(str::to_owned)
        })
        .collect()
}

async fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn campaign() -> NewCampaign {
    NewCampaign {
        name: "launch".into(),
        description: None,
        subject: "News".into(),
        body: "<p>Hello</p>".into(),
        from: EmailAddress::parse("news@example.com").unwrap(),
        from_name: None,
        reply_to: None,
        audience: AudienceKind::All,
        segment_id: None,
        audience_filter: None,
    }
}

#[actix::test]
async fn a_campaign_handed_over_mid_send_reaches_every_recipient_once() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(&dir.path().join("data"), 8 << 20).unwrap();
    let (a, b) = two_nodes(dir.path(), || store.clone());
    hand_over_mid_send(a, b).await;
}

/// The same on PostgreSQL: each node its own partial view of one schema, the epochs
/// from the lease table, every write of the project fenced.
#[actix::test]
async fn on_postgresql_a_campaign_handed_over_mid_send_reaches_every_recipient_once() {
    let Some(open) = postgres().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_nodes(dir.path(), open);
    hand_over_mid_send(a, b).await;
}

/// The new owner's runner may be the first of its work to touch the project, before
/// the project's actor has read the contacts into memory: its batch must still find
/// every recipient (once it queued none of them, counted them as skipped and moved on).
#[actix::test]
async fn on_postgresql_a_campaign_taken_over_before_anything_was_queued_skips_no_one() {
    let Some(open) = postgres().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_nodes(dir.path(), open);
    take_over_before_the_first_batch(a, b).await;
}

#[actix::test]
async fn a_campaign_taken_over_before_anything_was_queued_skips_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = SledStore::open(&dir.path().join("data"), 8 << 20).unwrap();
    let (a, b) = two_nodes(dir.path(), || store.clone());
    take_over_before_the_first_batch(a, b).await;
}

/// Nodes A and B, each on a store from `open` and writing what it sends under `dir`.
fn two_nodes(dir: &Path, open: impl Fn() -> Arc<dyn Store>) -> (Node, Node) {
    let a = Node::start("a", open(), dir.join("out-a"));
    let b = Node::start("b", open(), dir.join("out-b"));
    (a, b)
}

/// Opens stores on a schema of their own, or None (the test skipped) without
/// `MAILROOM_TEST_POSTGRES_URL`.
async fn postgres() -> Option<impl Fn() -> Arc<dyn Store>> {
    let url = postgres_schema_url().await?;
    Some(move || open_postgres_node(&url))
}

/// A fills the project and sends a campaign, and hands the project to B before its
/// runner queued a batch; B's runner queues them all: every recipient gets one email
/// and none is counted as skipped.
async fn take_over_before_the_first_batch(a: Node, b: Node) {
    let p = ProjectId::new();
    a.take(p).await;
    fill(&a, p).await;
    let c = crate::campaign::actions::create(&a.registry, p, campaign())
        .await
        .unwrap();
    // SENDING, its audience fixed and nothing queued yet, as a crash right after the
    // runner fixed the audience leaves it: the records written here, so that no runner
    // of A's starts it (and B's has no audience to fix, which reads the contacts).
    let id = c.id;
    a.registry
        .send(
            p,
            crate::project::apply::Apply::durable(move |ctx, _| {
                campaigns::send(ctx, id, None)?;
                let c = campaigns::get(ctx.store, ctx.project, id)?;
                let now = ctx.now.millis();
                let ids = audience::members(ctx.store, ctx.table, ctx.project, &c, now)?;
                let total = ids.len() as u64;
                campaigns::write_audience(ctx, id, 0, vec![ids])?;
                campaigns::fix_audience(ctx, id, total).map(|_| ())
            }),
        )
        .await
        .unwrap();
    a.give_up(p).await;
    // B's project actors (one arbiter) are held up by another project's long write, so
    // its runner's first batch comes before p's actor has read p's contacts.
    let q = ProjectId::new();
    b.take(q).await;
    let registry = b.registry.clone();
    let busy = tokio::spawn(async move {
        let slow = crate::project::apply::Apply::durable(|_, _| {
            std::thread::sleep(Duration::from_millis(1500));
            Ok(())
        });
        registry.send(q, slow).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.take(p).await;

    wait_for(
        "the campaign ends SENT on B",
        Duration::from_secs(60),
        || campaigns::get(&*b.store, p, c.id).is_ok_and(|c| c.status == CampaignStatus::Sent),
    )
    .await;
    busy.await.unwrap().unwrap();
    let stats = crate::campaign::stats::load(&*b.store, p, c.id).unwrap();
    assert_eq!(stats.skipped, 0, "no recipient skipped: {stats:?}");
    let got: HashSet<String> = b.recipients().into_iter().collect();
    assert_eq!(got.len(), RECIPIENTS, "every recipient got the campaign");
    assert_eq!(b.recipients().len(), RECIPIENTS, "and no one got it twice");
    assert!(a.recipients().is_empty(), "A sent nothing");
}

/// A trusted sender domain and `RECIPIENTS` subscribed contacts.
async fn fill(a: &Node, p: ProjectId) {
    crate::domain::actions::trust(&a.registry, p, DomainName::parse("example.com").unwrap())
        .await
        .unwrap();
    for i in 0..RECIPIENTS {
        let contact = UpsertContact {
            email: EmailAddress::parse(&format!("r{i}@example.org")).unwrap(),
            subscribed: Some(true),
            default_subscribed: true,
            data: DataPatch::default(),
        };
        crate::contact::actions::upsert(&a.registry, p, contact)
            .await
            .unwrap();
    }
}

/// A sends the first share of a campaign, hands the project to B mid-send, and B
/// sends the rest: each recipient gets one email, A none after its release.
async fn hand_over_mid_send(a: Node, b: Node) {
    let p = ProjectId::new();
    a.take(p).await;
    fill(&a, p).await;
    let c = crate::campaign::actions::create(&a.registry, p, campaign())
        .await
        .unwrap();
    crate::campaign::actions::send(&a.registry, &a.campaigns, p, c.id, None)
        .await
        .unwrap();
    wait_for("A sends a first share", Duration::from_secs(30), || {
        a.recipients().len() >= 30
    })
    .await;

    a.give_up(p).await;
    let sent_by_a = a.recipients().len();
    assert!(
        sent_by_a < RECIPIENTS,
        "handed over in the middle of the send"
    );
    assert!(matches!(
        crate::campaign::actions::cancel(&a.registry, p, c.id).await,
        Err(Error::NotOwner { .. })
    ));
    b.take(p).await;

    wait_for(
        "the campaign ends SENT on B",
        Duration::from_secs(60),
        || campaigns::get(&*b.store, p, c.id).is_ok_and(|c| c.status == CampaignStatus::Sent),
    )
    .await;
    assert_eq!(
        a.recipients().len(),
        sent_by_a,
        "A sent nothing after its release"
    );
    let all: Vec<String> = a.recipients().into_iter().chain(b.recipients()).collect();
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(
        distinct.len(),
        RECIPIENTS,
        "every recipient got the campaign"
    );
    assert_eq!(all.len(), RECIPIENTS, "and no one got it twice");
    assert!(!b.recipients().is_empty(), "B sent the rest");
}
