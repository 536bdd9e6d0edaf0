//! The outbox's retry schedule. Its keys sort by project, then due time
//! (`keys::outbox`), so a forward scan of one project's queue yields what is due first;
//! the email record itself is `keys::email`.

use crate::error::Result;
use crate::model::EmailId;
use crate::store::{keys, Store};

/// How many emails wait in the outbox, and when the oldest of them was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    pub emails: u64,
    /// Milliseconds since the epoch; None when the outbox is empty.
    pub oldest_ms: Option<i64>,
}

/// Counts the outbox from its keys alone: an email's id, a UUID v7, carries when it
/// was made, and a retry moves its due time but not its id. The keys are 47 bytes
/// with empty values, so 100,000 waiting emails are a few megabytes to walk.
pub fn depth(store: &dyn Store) -> Result<Depth> {
    let mut d = Depth::default();
    for kv in store.scan(keys::OUTBOX, None, false) {
        let (key, _) = kv?;
        let Some((_, _, id)) = keys::parse_outbox(&key) else {
            continue;
        };
        d.emails += 1;
        let made = made_at(id);
        d.oldest_ms = Some(d.oldest_ms.map_or(made, |o| o.min(made)));
    }
    Ok(d)
}

/// How many of one project's emails wait in the outbox: its keys are grouped by project
/// (`keys::outbox_of`), so this walks that project's queue only.
pub fn depth_of(store: &dyn Store, p: crate::model::ProjectId) -> Result<u64> {
    let mut n = 0;
    for kv in store.scan(&keys::outbox_of(p), None, false) {
        kv?;
        n += 1;
    }
    Ok(n)
}

/// When an email's id was made, in milliseconds since the epoch.
fn made_at(id: EmailId) -> i64 {
    id.as_uuid()
        .get_timestamp()
        .map(|t| {
            let (s, n) = t.to_unix();
            (s as i64) * 1_000 + i64::from(n / 1_000_000)
        })
        .unwrap_or(0)
}

/// Exponential backoff for the `attempt`th failure (1-based), capped at ten minutes.
pub fn backoff_ms(base_ms: u64, attempt: u32) -> u64 {
    base_ms
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(20))
        .min(600_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_depth_counts_every_waiting_email_and_dates_the_oldest_by_its_id() {
        use crate::model::ProjectId;
        use crate::store::{Batch, SledStore};
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        assert_eq!(depth(&*store).unwrap(), Depth::default());
        let (old, new) = (EmailId::new(), EmailId::new());
        let mut batch = Batch::new();
        // The older email was retried: its due time is later than the newer one's.
        batch.put(keys::outbox(9_000, ProjectId::new(), old), Vec::new());
        batch.put(keys::outbox(1_000, ProjectId::new(), new), Vec::new());
        store.apply(batch).unwrap();
        let d = depth(&*store).unwrap();
        assert_eq!(d.emails, 2);
        assert_eq!(d.oldest_ms, Some(made_at(old)));
        assert!(made_at(old) <= made_at(new) && made_at(old) > 1_600_000_000_000);
    }

    /// What one /metrics scan costs with 100,000 emails waiting.
    /// `cargo test -p mailroom-actors --release depth_of_an_outbox -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement: cargo test -p mailroom-actors --release depth_of_an_outbox -- --ignored --nocapture"]
    fn depth_of_an_outbox_of_100000() {
        use crate::model::ProjectId;
        use crate::store::{Batch, SledStore};
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 64 << 20).unwrap();
        let p = ProjectId::new();
        let mut batch = Batch::new();
        for i in 0..100_000i64 {
            batch.put(keys::outbox(1_000 + i, p, EmailId::new()), Vec::new());
        }
        store.apply(batch).unwrap();
        store.flush_blocking().unwrap();
        let started = std::time::Instant::now();
        let d = depth(&*store).unwrap();
        assert_eq!(d.emails, 100_000);
        eprintln!("one scan of an outbox of 100,000: {:?}", started.elapsed());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff_ms(100, 1), 100);
        assert_eq!(backoff_ms(100, 3), 400);
        assert_eq!(backoff_ms(1000, 30), 600_000);
    }
}
