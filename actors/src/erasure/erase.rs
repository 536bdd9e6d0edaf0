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
//! 3. emails (`erasure_emails`): those still waiting are cancelled, and every one keeps
//!    its status and times for the campaign stats but loses its address and content;
//! 4. events, from the contact's index: the log, the by-name index, then the index;
//! 5. the contact's per-name statistics;
//! 6. remembered Idempotency-Key answers that name the contact;
//! 7. the rejected rows of imports that name the address;
//! 8. event webhook deliveries that carry the contact (waiting ones called off).
//!
//! Emails come before events: a delivery outcome of an email not yet anonymised still
//! records an `email.sent` event for the contact, which phase 4 then takes; once the
//! email is anonymised its outcome records none (the placeholder is no address).

use super::emails as erasure_emails;
pub use crate::contact::erasure_record::{load, Erasure, Phase, Step};
use crate::error::Result;
use crate::model::{ContactId, EmailId, Event, ProjectId, WorkflowId};
use crate::project::attempts::Attempts;
use crate::project::counters::add_to_counter;
use crate::project::events::EVENTS_COUNTER;
use crate::store::blocks::{self, Id};
use crate::store::keys;
use crate::store::{codec, Batch, Store};
use crate::workflow::executions;

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
            Phase::Campaigns => campaigns(store, &mut batch, p, c, &erasure, left)?,
            Phase::Workflows => workflows(store, &mut batch, p, c, &erasure, left)?,
            Phase::Emails => {
                let ctx = erasure_emails::Ctx {
                    store,
                    p,
                    c,
                    erasure: &erasure,
                    attempts,
                    now,
                };
                let (step, dropped) = erasure_emails::slice(&ctx, &mut batch, left)?;
                progress.dropped.extend(dropped);
                step
            }
            Phase::Events => events(store, &mut batch, p, c, left)?,
            Phase::Stats => stats(store, &mut batch, p, c, &erasure, left)?,
            Phase::Idempotency => idempotency(store, &mut batch, p, c, &erasure, left)?,
            Phase::Imports => imports(store, &mut batch, p, &erasure, left)?,
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
                    batch.delete(keys::link_unsubscribed(p, c));
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

/// Walks the keys under `prefix` past the erasure's cursor, at most `left` of them,
/// calling `each` with every key; the cursor moves past the last one seen.
fn walk(
    store: &dyn Store,
    prefix: &[u8],
    erasure: &Erasure,
    left: usize,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<Step> {
    let mut used = 0;
    let mut last = None;
    for kv in store.scan(prefix, erasure.after(), false) {
        let (k, v) = kv?;
        if used == left {
            return Ok(Step {
                used,
                cursor: Some(last.unwrap_or_else(|| erasure.cursor.clone())),
            });
        }
        each(&k, &v)?;
        used += 1;
        last = Some(k);
    }
    Ok(Step { used, cursor: None })
}

fn campaigns(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let prefix = keys::campaigns(p);
    walk(store, &prefix, erasure, left, |k, _| {
        if let Some(id) = keys::id_after(k, &prefix) {
            batch.delete(keys::campaign_unsubscribed(p, id, c));
        }
        Ok(())
    })
}

/// A workflow at a time: its executions of the contact, then its re-entry record. A
/// workflow with more executions than the slice has room for is finished by the next
/// slice (the deleted ones are gone from its index, so it starts over there).
fn workflows(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let prefix = keys::workflows(p);
    let mut used = 0;
    let mut last = None;
    for kv in store.scan(&prefix, erasure.after(), false) {
        let (k, _) = kv?;
        let Some(w) = keys::id_after::<WorkflowId>(&k, &prefix) else {
            continue;
        };
        let (n, whole) = executions_of(store, batch, p, w, c, left.saturating_sub(used))?;
        used += n;
        if !whole {
            // Resumes at this workflow: the cursor stays before it.
            let cursor = last.unwrap_or_else(|| erasure.cursor.clone());
            return Ok(Step {
                used,
                cursor: Some(cursor),
            });
        }
        batch.delete(keys::entries(p, w, c));
        used += 1;
        last = Some(k);
        if used >= left {
            return Ok(Step { used, cursor: last });
        }
    }
    Ok(Step { used, cursor: None })
}

/// Deletes up to `left` of the contact's executions of `w`, with what each waits on;
/// answers how many, and whether that was all of them.
fn executions_of(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    w: WorkflowId,
    c: ContactId,
    left: usize,
) -> Result<(usize, bool)> {
    let mut n = 0;
    let mut ended = 0i64;
    for kv in store.scan(&keys::executions_of_contact(p, w, c), None, false) {
        let (k, _) = kv?;
        if n == left {
            add_to_counter(store, batch, p, &executions::finished_counter(w), -ended)?;
            return Ok((n, false));
        }
        batch.delete(k.clone());
        n += 1;
        let Some(x) = keys::execution_in(&k) else {
            continue;
        };
        if let Some(mut e) = executions::load(store, p, x)? {
            if e.status.is_final() {
                // It was counted among the ended ones that pruning keeps in bounds.
                ended += 1;
            }
            executions::clear_wait(batch, p, &mut e);
        }
        batch.delete(keys::ready(p, x));
        batch.delete(keys::execution(p, x));
    }
    if ended > 0 {
        add_to_counter(store, batch, p, &executions::finished_counter(w), -ended)?;
    }
    Ok((n, true))
}

/// The newest `left` events of the contact's index leave the log, their name's index
/// and the contact's index; the index itself goes once it is empty.
fn events(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    left: usize,
) -> Result<Step> {
    let list = keys::events_by_contact(p, c);
    let ids: Vec<Id> = blocks::iter_rev(store, &list, None)
        .take(left)
        .map(|e| e.map(|(id, _)| id))
        .collect::<Result<_>>()?;
    if ids.is_empty() {
        for kv in store.scan(&list, None, false) {
            batch.delete(kv?.0);
        }
        return Ok(Step {
            used: 1,
            cursor: None,
        });
    }
    let log = keys::events(p);
    let mut by_name: std::collections::BTreeMap<String, Vec<Id>> = Default::default();
    for id in &ids {
        if let Some(bytes) = blocks::get(store, &log, id)? {
            by_name
                .entry(Event::decode(&bytes)?.name)
                .or_default()
                .push(*id);
        }
    }
    let removed = blocks::remove(store, batch, &log, &ids)?;
    for (name, ids) in &by_name {
        blocks::remove(store, batch, &keys::events_by_name(p, name), ids)?;
    }
    blocks::remove(store, batch, &list, &ids)?;
    add_to_counter(store, batch, p, EVENTS_COUNTER, -(removed as i64))?;
    Ok(Step {
        used: ids.len(),
        // Not a position: the events taken are gone from the index, so the next slice
        // starts from its (new) newest.
        cursor: Some(b"events".to_vec()),
    })
}

/// The contact's statistics under every event name the project has seen.
fn stats(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    c: ContactId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    let prefix = keys::event_names(p);
    walk(store, &prefix, erasure, left, |k, _| {
        let name = String::from_utf8_lossy(&k[prefix.len()..]);
        batch.delete(keys::contact_event_stats(p, &name, c));
        Ok(())
    })
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

/// Imports whose rejected rows name the address: those rows lose their email cell and
/// reason (their line and the import's counts stay).
fn imports(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    walk(store, &keys::imports_of(p), erasure, left, |k, v| {
        let mut import: crate::contact::import::Import = codec::decode(v)?;
        if import.erase_rejected(&erasure.email) {
            batch.put(k.to_vec(), codec::encode(&import)?);
        }
        Ok(())
    })
}

pub(super) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::queries::{list_events, EventFilter};
    use crate::model::{EmailAddress, PageRequest, Timestamp};
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
        while !run(&*store, p, gone, &attempts, 7, Timestamp::from(9_999))
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
