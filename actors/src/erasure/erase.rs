//! Erasing a deleted contact's personal data everywhere it is kept. A contact may have
//! a million events, more than one actor message should touch, so the delete writes a
//! durable erasure record (`keys::erasure`) in its own batch, and the work then goes on
//! in slices of a bounded number of records, each slice one batch with the record's
//! new progress: a crash resumes at the last slice applied (`erasure_runner`).
//!
//! The phases run in this order, each from its own cursor:
//! 1. campaign unsubscribe markers;
//! 2. workflow executions (with their waits, timers and ready entries) and re-entry
//!    records;
//! 3. emails: those still waiting are cancelled (their campaigns count them through
//!    the core's hooks), and every one keeps its status and times for the campaign
//!    stats but loses its address and content;
//! 4. events, from the contact's index: the log, the by-name index, then the index;
//! 5. the contact's per-name statistics;
//! 6. remembered Idempotency-Key answers that name the contact;
//! 7. the rejected rows of imports that name the address;
//! 8. event webhook deliveries that carry the contact (waiting ones called off).
//!
//! Each phase is its feature's (`campaign::erasure`, `workflow::erasure`,
//! `email::erasure`, `event::erasure`, `contact::import_erasure`,
//! `webhooks::records::erase_contact`), which alone names its keys; this module keeps
//! their order, the cursor and the idempotency phase (a foundation's keys).
//!
//! Emails come before events: a delivery outcome of an email not yet anonymised still
//! records an `email.sent` event for the contact, which phase 4 then takes; once the
//! email is anonymised its outcome records none (the placeholder is no address).

use crate::campaign::erasure as campaign_erasure;
use crate::contact::erasure_record::{contains, walk};
pub use crate::contact::erasure_record::{load, Erasure, Phase, Step};
use crate::contact::import_erasure;
use crate::email::erasure as email_erasure;
use crate::error::Result;
use crate::event::erasure as event_erasure;
use crate::model::{ContactId, EmailId, ProjectId};
use crate::project::attempts::Attempts;
use crate::project::hooks::Hooks;
use crate::store::keys;
use crate::store::{codec, Batch, Store};
use crate::workflow::erasure as workflow_erasure;

/// What a run did: whether the erasure is over, and the waiting emails it cancelled
/// (whose marks in `Attempts` the caller forgets once the write is durable).
#[derive(Debug, Default)]
pub struct Progress {
    pub done: bool,
    pub dropped: Vec<EmailId>,
}

/// Runs slices of the contact's erasure until about `budget` records are handled or it
/// ends. Each slice is applied as one batch with the erasure's progress.
pub fn run(
    store: &dyn Store,
    p: ProjectId,
    c: ContactId,
    attempts: &Attempts,
    hooks: &Hooks,
    budget: usize,
    now: crate::model::Timestamp,
) -> Result<Progress> {
    let mut progress = Progress::default();
    let mut used = 0;
    loop {
        let Some(mut erasure) = load(store, p, c)? else {
            progress.done = true;
            return Ok(progress);
        };
        if used >= budget {
            return Ok(progress);
        }
        let mut batch = Batch::new();
        let left = budget - used;
        let step = match erasure.phase {
            Phase::Campaigns => {
                campaign_erasure::unsubscribes(store, &mut batch, p, c, &erasure, left)?
            }
            Phase::Workflows => {
                workflow_erasure::executions(store, &mut batch, p, c, &erasure, left)?
            }
            Phase::Emails => {
                let ctx = email_erasure::Ctx {
                    store,
                    p,
                    c,
                    erasure: &erasure,
                    attempts,
                    hooks,
                    now,
                };
                let (step, dropped) = email_erasure::slice(&ctx, &mut batch, left)?;
                progress.dropped.extend(dropped);
                step
            }
            Phase::Events => event_erasure::events(store, &mut batch, p, c, left)?,
            Phase::Stats => event_erasure::stats(store, &mut batch, p, c, &erasure, left)?,
            Phase::Idempotency => idempotency(store, &mut batch, p, c, &erasure, left)?,
            Phase::Imports => import_erasure::imports(store, &mut batch, p, &erasure, left)?,
            Phase::Webhooks => crate::webhooks::records::erase_contact(
                store,
                &mut batch,
                p,
                c,
                &erasure.email,
                erasure.after(),
                left,
            )?,
        };
        used += step.used.max(1);
        match step.cursor {
            Some(cursor) => erasure.cursor = cursor,
            None => match erasure.phase.next() {
                Some(next) => {
                    erasure.phase = next;
                    erasure.cursor.clear();
                }
                None => {
                    batch.delete(keys::erasure(p, c));
                    crate::campaign::unsubscribe::forget_marker(&mut batch, p, c);
                    store.apply(batch)?;
                    tracing::info!(project = %p, contact = %c, "contact erased");
                    progress.done = true;
                    return Ok(progress);
                }
            },
        }
        batch.put(keys::erasure(p, c), codec::encode(&erasure)?);
        store.apply(batch)?;
    }
}

/// Remembered answers (a contact upsert, a send) that carry the address or the id.
fn idempotency(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let email = erasure.email.as_bytes();
    let id = c.to_string();
    walk(
        store,
        &keys::idempotency_records(p),
        erasure,
        left,
        |k, v| {
            if contains(v, email) || contains(v, id.as_bytes()) {
                batch.delete(k.to_vec());
            }
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::queries::{list_events, EventFilter};
    use crate::model::{EmailAddress, Event, PageRequest, Timestamp};
    use crate::project::events;
    use crate::store::SledStore;

    fn event(name: &str, c: ContactId, email: &EmailAddress, at: i64) -> Event {
        Event::system(name, c, email, Timestamp::from(at))
    }

    fn names(store: &dyn Store, p: ProjectId, f: EventFilter) -> (Vec<String>, u64) {
        let page = list_events(store, p, &f, &PageRequest::first(100)).unwrap();
        let emails = page.items.iter().map(|e| e.email.to_string()).collect();
        (emails, page.total)
    }

    #[test]
    fn an_erasure_in_slices_takes_every_event_of_the_contact_and_leaves_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let p = ProjectId::new();
        let (gone, kept) = (ContactId::new(), ContactId::new());
        let gone_at = EmailAddress::parse("gone@example.com").unwrap();
        let kept_at = EmailAddress::parse("kept@example.com").unwrap();
        // Interleaved, so both contacts' events share the log's blocks.
        for i in 0..40 {
            let name = if i % 3 == 0 { "signup" } else { "visit" };
            let mut batch = Batch::new();
            let evs = [
                event(name, gone, &gone_at, 1_000 + i * 10),
                event(name, kept, &kept_at, 1_000 + i * 10 + 5),
            ];
            events::append(&*store, &mut batch, p, &evs).unwrap();
            store.apply(batch).unwrap();
        }
        let mut batch = Batch::new();
        batch.put(
            keys::erasure(p, gone),
            codec::encode(&Erasure::new(gone_at.as_str())).unwrap(),
        );
        store.apply(batch).unwrap();

        let attempts = Attempts::default();
        let mut runs = 0;
        while !run(
            &*store,
            p,
            gone,
            &attempts,
            &Hooks::default(),
            7,
            Timestamp::from(9_999),
        )
        .unwrap()
        .done
        {
            runs += 1;
            assert!(runs < 100, "the erasure ends");
        }
        assert!(runs > 3, "40 events in slices of 7 take several runs");

        let (all, total) = names(&*store, p, EventFilter::default());
        assert_eq!((all.len(), total), (40, 40));
        assert!(all.iter().all(|e| e == "kept@example.com"));
        for name in ["signup", "visit"] {
            let f = EventFilter {
                name: Some(name.into()),
                since: Some(Timestamp::from(0)),
                ..Default::default()
            };
            let (emails, total) = names(&*store, p, f);
            assert!(emails.iter().all(|e| e == "kept@example.com"));
            assert_eq!(
                emails.len() as u64,
                total,
                "the {name} index holds no erased id"
            );
        }
        for (k, v) in store.scan(b"", None, false).map(Result::unwrap) {
            assert!(!contains(&k, b"gone@example.com") && !contains(&v, b"gone@example.com"));
            assert!(
                !contains(&k, gone.as_bytes()),
                "a key of the contact is left"
            );
        }
    }
}
