use std::time::{Duration, Instant};

use super::events;
use crate::event::queries::{event_names, list_events, EventFilter};
use crate::model::{ContactId, EmailAddress, Event, PageRequest, ProjectId, Timestamp};
use crate::project::events::append;
use crate::store::{Batch, SledStore, Store};

const DAY_MS: i64 = 24 * 3_600_000;

/// `n` events a day for `days` days from day 0, spread over `contacts` contacts and two
/// names.
fn fill(store: &dyn Store, p: ProjectId, days: i64, n: usize, contacts: &[ContactId]) {
    let to = EmailAddress::parse("a@example.com").unwrap();
    for day in 0..days {
        let events: Vec<Event> = (0..n)
            .map(|i| {
                let name = if i % 2 == 0 { "login" } else { "buy" };
                let at = Timestamp::from(day * DAY_MS + i as i64);
                Event::system(name, contacts[i % contacts.len()], &to, at)
            })
            .collect();
        let mut batch = Batch::new();
        append(store, &mut batch, p, &events).unwrap();
        store.apply(batch).unwrap();
    }
}

fn total(store: &dyn Store, p: ProjectId, f: EventFilter) -> (u64, usize) {
    let page = PageRequest::parse(Some("100"), None).unwrap();
    let list = list_events(store, p, &f, &page).unwrap();
    let mut n = list.items.len();
    let mut cursor = list.next_cursor;
    while let Some(c) = cursor {
        let page = PageRequest::parse(Some("100"), Some(&c)).unwrap();
        let next = list_events(store, p, &f, &page).unwrap();
        n += next.items.len();
        cursor = next.next_cursor;
    }
    (list.total, n)
}

#[test]
fn events_go_in_bounded_slices_from_the_log_and_every_index_while_name_counts_stay() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path(), 64 << 20).unwrap();
    let p = ProjectId::new();
    let contacts: Vec<ContactId> = (0..50).map(|_| ContactId::new()).collect();
    fill(&*store, p, 10, 1_000, &contacts);
    let names_before = event_names(&*store, p).unwrap();

    // Days 0 to 5 expire: 6,000 events, in slices of 200.
    let before = Timestamp::from(6 * DAY_MS);
    let (mut removed, mut slices, mut slowest) = (0, 0, Duration::ZERO);
    loop {
        let started = Instant::now();
        let n = events::purge(&*store, p, before, 200).unwrap();
        slowest = slowest.max(started.elapsed());
        assert!(n <= 200, "a slice removes at most its max");
        removed += n;
        slices += 1;
        if n < 200 {
            break;
        }
    }
    eprintln!("{removed} events in {slices} slices of 200; the slowest took {slowest:?}");
    assert_eq!(removed, 6_000);
    assert_eq!(
        events::purge(&*store, p, before, 200).unwrap(),
        0,
        "nothing left"
    );

    assert_eq!(total(&*store, p, EventFilter::default()), (4_000, 4_000));
    let login = EventFilter {
        name: Some("login".into()),
        ..Default::default()
    };
    assert_eq!(total(&*store, p, login), (2_000, 2_000));
    let one = EventFilter {
        contact: Some(contacts[3]),
        ..Default::default()
    };
    assert_eq!(
        total(&*store, p, one).1,
        80,
        "the contact's index lost its old entries"
    );
    let one_buy = EventFilter {
        contact: Some(contacts[3]),
        name: Some("buy".into()),
        ..Default::default()
    };
    assert_eq!(total(&*store, p, one_buy), (80, 80));
    assert_eq!(
        event_names(&*store, p).unwrap(),
        names_before,
        "aggregates stay"
    );

    // A later purge goes on where the last one stopped.
    let removed = events::purge(&*store, p, Timestamp::from(7 * DAY_MS), 5_000).unwrap();
    assert_eq!(removed, 1_000);
    assert_eq!(total(&*store, p, EventFilter::default()), (3_000, 3_000));
}
