//! Waits that double after each failure in a row, up to a cap: how long a supervised
//! worker that panicked, or work that keeps failing, waits before it tries again.

use std::time::Duration;

/// The wait after the `n`th failure in a row: none before the first, then `first`,
/// twice it, four times it, ... at most `max`.
pub fn doubling(first: Duration, n: u32, max: Duration) -> Duration {
    match n {
        0 => Duration::ZERO,
        n => first.saturating_mul(2u32.saturating_pow(n - 1)).min(max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_doubles_from_the_first_failure_up_to_its_cap() {
        let s = Duration::from_secs;
        let waits: Vec<Duration> = [0, 1, 2, 3, 9, 40, u32::MAX]
            .map(|n| doubling(s(1), n, s(300)))
            .to_vec();
        assert_eq!(waits, [s(0), s(1), s(2), s(4), s(256), s(300), s(300)]);
    }
}
