//! A stored email record that no longer decodes (damaged on disk, or an address that
//! does not parse) is taken out of the outbox once, instead of being read again every
//! round while it holds one of its project's in-flight slots.

use std::time::Duration;

use super::common::{deliver_to, email_status, queue_email, sled_engine, trust_sender, wait_for};
use crate::model::{EmailStatus, ProjectId};
use crate::store::{keys, Batch, Store};
use mailroom_testkit::smtp::SmtpServer;

const LIMIT: Duration = Duration::from_secs(20);

#[actix::test]
async fn an_email_record_that_does_not_decode_leaves_the_outbox_and_the_next_email_goes_out() {
    let (dir, relay) = (tempfile::tempdir().unwrap(), SmtpServer::start());
    let registry = sled_engine(&dir);
    let store = registry.store().clone();
    let p = ProjectId::new();
    trust_sender(&registry, p).await;
    // Queued before any dispatcher runs, then damaged where it is stored.
    let damaged = queue_email(&registry, p, "ada@example.com").await;
    let mut batch = Batch::new();
    batch.put(keys::email(p, damaged), vec![0xff; 7]);
    store.apply(batch).unwrap();
    store.durable().await.unwrap();
    let in_outbox = |store: &dyn Store| {
        store
            .scan(&keys::outbox_of(p), None, false)
            .filter_map(|kv| kv.ok())
            .any(|(k, _)| k.ends_with(damaged.as_bytes()))
    };
    assert!(in_outbox(&*store), "the damaged email waits in the outbox");

    let _dispatcher = deliver_to(&registry, &relay);
    let next = queue_email(&registry, p, "bob@example.com").await;
    wait_for("the next email is SENT", LIMIT, || {
        email_status(&*store, p, next) == EmailStatus::Sent
    })
    .await;
    wait_for("the damaged email leaves the outbox", LIMIT, || {
        !in_outbox(&*store)
    })
    .await;
    assert!(
        relay
            .received()
            .iter()
            .all(|m| !m.rcpt_to.iter().any(|r| r == "ada@example.com")),
        "nothing went to the damaged email's recipient"
    );
}
