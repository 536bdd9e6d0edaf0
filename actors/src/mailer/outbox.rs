//! The outbox's retry schedule. Its keys sort by project, then due time
//! (`keys::outbox`), so a forward scan of one project's queue yields what is due first;
//! the email record itself is `keys::email`.

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
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff_ms(100, 1), 100);
        assert_eq!(backoff_ms(100, 3), 400);
        assert_eq!(backoff_ms(1000, 30), 600_000);
    }
}
