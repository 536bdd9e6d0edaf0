//! The features' hooks into the core's writes (`project::hooks`, wired by
//! `wiring::hooks`): what a feature does on a write made in the core lands in that
//! write's one batch, and an engine built without the hooks runs the core alone.

use std::sync::Arc;

use super::common::{create_waiting_workflow, signup};
use crate::campaign::{stats, AudienceKind, Campaign, CampaignStatus};
use crate::email::sending::{load_email, DeliveryOutcome, RecordDelivery, CANCELLED_BEFORE_SENT};
use crate::event::actions::track;
use crate::event::queries::each_event;
use crate::metrics::ExecutionMove;
use crate::model::{
    CampaignId, ContactId, EmailAddress, EmailId, EmailStatus, Mailbox, OutboundEmail, ProjectId,
    Timestamp,
};
use crate::project::apply::Apply;
use crate::project::hooks::Hooks;
use crate::project::{Registry, RegistryConfig};
use crate::segment::actions as segment_actions;
use crate::segment::records::CreateSegment;
use crate::segment::{Group, SegmentKind};
use crate::store::{keys, Batch, SledStore, Store};
use crate::SystemClock;

struct Engine {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    registry: Registry,
    project: ProjectId,
}

impl Engine {
    fn start(hooks: Hooks) -> Engine {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
        let registry = Registry::new(
            store.clone(),
            Arc::new(SystemClock),
            RegistryConfig::default(),
            super::common::links(),
            hooks,
        );
        Engine {
            _dir: dir,
            store,
            registry,
            project: ProjectId::new(),
        }
    }

    /// A DYNAMIC segment of the contacts that triggered `signup`, recording entries.
    async fn add_signed_up_segment(&self) -> crate::error::Result<()> {
        let filters = serde_json::json!({"operator": "AND", "conditions":
            [{"field": "event.signup", "operator": "triggered"}]});
        let segment = CreateSegment {
            name: "Signed up".into(),
            description: None,
            kind: SegmentKind::Dynamic,
            filters: Some(Group::parse(&filters, "filters").unwrap()),
            track_membership: true,
        };
        segment_actions::create(&self.registry, self.project, segment)
            .await
            .map(drop)
    }

    fn event_names(&self) -> Vec<String> {
        let mut names: Vec<String> = each_event(&*self.store, self.project)
            .map(|e| e.unwrap().name)
            .collect();
        names.sort();
        names
    }

    fn started(&self) -> u64 {
        self.registry.metrics().executions(ExecutionMove::Started)
    }
}

#[actix::test]
async fn a_tracked_event_with_the_segment_entry_and_the_workflow_start_it_causes_is_one_batch() {
    let engine = Engine::start(crate::wiring::hooks());
    let now = chrono::Utc::now().timestamp_millis();
    create_waiting_workflow(&engine.registry, engine.project, now)
        .await
        .unwrap();
    engine.add_signed_up_segment().await.unwrap();
    let before = engine.store.batches_applied();
    track(&engine.registry, engine.project, signup("ada@example.com"))
        .await
        .unwrap();
    assert_eq!(
        engine.store.batches_applied() - before,
        1,
        "the contact, its event, the segment entry and the execution are one batch"
    );
    assert_eq!(
        engine.event_names(),
        ["segment.signed-up.entry", "signup"],
        "the segment hook judged the write with its event"
    );
    assert_eq!(
        engine.started(),
        1,
        "the after-events hook started the workflow"
    );
}

#[actix::test]
async fn an_engine_built_without_hooks_records_events_but_nothing_reacts_to_them() {
    let engine = Engine::start(Hooks::default());
    let now = chrono::Utc::now().timestamp_millis();
    create_waiting_workflow(&engine.registry, engine.project, now)
        .await
        .unwrap();
    track(&engine.registry, engine.project, signup("ada@example.com"))
        .await
        .unwrap();
    assert_eq!(engine.event_names(), ["signup"]);
    assert_eq!(engine.started(), 0, "no workflow starts without its hook");
    let refused = engine.add_signed_up_segment().await;
    assert!(
        matches!(&refused, Err(crate::Error::Internal(m)) if m.contains("wiring")),
        "a segment is refused before anything is written, naming what is missing: {refused:?}"
    );
}

/// A campaign in `status`, one email of it queued (its stats say so) and in the outbox
/// at `due`: written as the campaign's runner leaves them.
async fn campaign_with_one_email_queued(
    engine: &Engine,
    status: CampaignStatus,
    due: i64,
) -> (CampaignId, EmailId) {
    let now = chrono::Utc::now().timestamp_millis();
    let to = EmailAddress::parse("ada@example.com").unwrap();
    let from = EmailAddress::parse("news@example.com").unwrap();
    let c = Campaign {
        id: CampaignId::new(),
        name: "launch".into(),
        description: None,
        subject: "News".into(),
        body: "<p>Hello</p>".into(),
        from: from.clone(),
        from_name: None,
        reply_to: None,
        audience: AudienceKind::All,
        segment_id: None,
        audience_filter: None,
        status,
        scheduled_at: None,
        sent_at: None,
        created_at: Timestamp::from(now),
        updated_at: Timestamp::from(now),
        progress: Default::default(),
    };
    let email = OutboundEmail {
        id: EmailId::new(),
        project: engine.project,
        contact_id: ContactId::new(),
        to: Mailbox::to(None, &to),
        from: Mailbox::new(None, &from),
        reply_to: None,
        subject: "News".into(),
        html: "<p>Hello</p>".into(),
        headers: Vec::new(),
        attachments: Vec::new(),
        text: None,
        attachments_id: None,
        marketing: true,
        campaign_id: Some(c.id),
        workflow_execution_id: None,
        status: EmailStatus::Queued,
        attempts: 0,
        last_error: None,
        due_at: due,
        created_at: now,
        sent_at: None,
    };
    let ids = (c.id, email.id);
    engine
        .registry
        .send(
            engine.project,
            Apply::durable(move |ctx, _| {
                let p = ctx.project;
                let mut batch = Batch::new();
                batch.put(keys::campaign(p, c.id), c.encode()?);
                stats::update(ctx.store, &mut batch, p, c.id, |s| s.queued = 1)?;
                batch.put(keys::email(p, email.id), email.encode()?);
                batch.put(keys::outbox(due, p, email.id), Vec::new());
                ctx.store.apply(batch)
            }),
        )
        .await
        .unwrap();
    ids
}

#[actix::test]
async fn a_retry_of_a_cancelled_campaigns_email_ends_it_and_counts_it_cancelled_in_one_batch() {
    let engine = Engine::start(crate::wiring::hooks());
    let due = 1_000;
    let (c, email) = campaign_with_one_email_queued(&engine, CampaignStatus::Cancelled, due).await;
    let before = engine.store.batches_applied();
    let retry = RecordDelivery {
        id: email,
        outbox_key: keys::outbox(due, engine.project, email),
        outcome: DeliveryOutcome::Retry {
            error: "451 try later".into(),
            due_at: due + 60_000,
        },
    };
    engine.registry.send(engine.project, retry).await.unwrap();
    assert_eq!(
        engine.store.batches_applied() - before,
        1,
        "the outcome and the campaign's count are one batch"
    );
    let stored = load_email(&*engine.store, engine.project, email)
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.status,
        EmailStatus::Failed,
        "called off, not retried"
    );
    assert_eq!(stored.last_error.as_deref(), Some(CANCELLED_BEFORE_SENT));
    let counts = stats::load(&*engine.store, engine.project, c).unwrap();
    assert_eq!((counts.queued, counts.cancelled), (0, 1));
}

#[actix::test]
async fn a_retry_of_a_sending_campaigns_email_stays_queued_for_its_next_attempt() {
    let engine = Engine::start(crate::wiring::hooks());
    let due = 1_000;
    let (c, email) = campaign_with_one_email_queued(&engine, CampaignStatus::Sending, due).await;
    let retry = RecordDelivery {
        id: email,
        outbox_key: keys::outbox(due, engine.project, email),
        outcome: DeliveryOutcome::Retry {
            error: "451 try later".into(),
            due_at: due + 60_000,
        },
    };
    engine.registry.send(engine.project, retry).await.unwrap();
    let stored = load_email(&*engine.store, engine.project, email)
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, EmailStatus::Queued);
    assert_eq!(stored.due_at, due + 60_000);
    let counts = stats::load(&*engine.store, engine.project, c).unwrap();
    assert_eq!((counts.queued, counts.cancelled), (1, 0));
}

#[actix::test]
async fn a_deleted_contact_takes_its_unsubscribe_links_marker_with_it_in_its_delete_batch() {
    let engine = Engine::start(crate::wiring::hooks());
    let p = engine.project;
    let ada = track(&engine.registry, p, signup("ada@example.com"))
        .await
        .unwrap()
        .contact;
    crate::campaign::unsubscribe::unsubscribe_contact(&engine.registry, p, ada, None)
        .await
        .unwrap();
    let marker = keys::link_unsubscribed(p, ada);
    assert!(
        engine.store.get(&marker).unwrap().is_some(),
        "the link's unsubscribe left its marker"
    );
    let before = engine.store.batches_applied();
    engine
        .registry
        .send(
            p,
            Apply::durable(move |ctx, counts| crate::contact::records::delete(ctx, counts, ada)),
        )
        .await
        .unwrap();
    assert_eq!(engine.store.batches_applied() - before, 1);
    assert_eq!(
        engine.store.get(&marker).unwrap(),
        None,
        "the campaign feature's contact-deleted hook dropped it"
    );
}
