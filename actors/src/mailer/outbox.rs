//! The outbox: keys that sort by due time (`keys::outbox`), so a forward scan yields
//! what is due first. The email record itself is `keys::email`.

use crate::model::{EmailId, ProjectId};
use crate::store::keys;

pub const PREFIX: &[u8] = keys::OUTBOX;

pub fn key(due_ms: i64, p: ProjectId, id: EmailId) -> Vec<u8> {
    keys::outbox(due_ms, p, id)
}

pub fn email_key(p: ProjectId, id: EmailId) -> Vec<u8> {
    keys::email(p, id)
}

/// (due, project, email) of an outbox key.
pub fn parse(key: &[u8]) -> Option<(i64, ProjectId, EmailId)> {
    keys::parse_outbox(key)
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
    fn keys_round_trip_and_sort_by_due_time() {
        let (p, e) = (ProjectId::new(), EmailId::new());
        assert_eq!(parse(&key(42, p, e)), Some((42, p, e)));
        assert!(key(9, p, e) < key(10, p, e));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff_ms(100, 1), 100);
        assert_eq!(backoff_ms(100, 3), 400);
        assert_eq!(backoff_ms(1000, 30), 600_000);
    }
}
