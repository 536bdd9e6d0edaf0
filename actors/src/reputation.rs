//! A project's sending reputation (API.md 27): its rolling bounce and complaint rates,
//! over its recent emails the relay answered (delivered or bounced). Two tallies of up
//! to `WINDOW` emails each, the current and the one before, make the window: the rates
//! cover the last 1,000 to 2,000 emails, and one key of a few bytes is all an outcome
//! rewrites. A late bounce or a complaint counts in the current tally.
//!
//! It names only the core, so the email feature (outcomes) and `feedback` (reports) can
//! both write it.

use serde::{Deserialize, Serialize};

use crate::codec;
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{keys, Batch, Store};

/// Emails per tally.
pub const WINDOW: u64 = 1000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Emails the relay answered (delivered or bounced).
    pub sent: u64,
    pub bounced: u64,
    pub complained: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    previous: Tally,
    current: Tally,
}

impl Window {
    fn sent(&self) -> u64 {
        self.previous.sent + self.current.sent
    }

    /// Bounced of sent over the window (0 before anything was sent).
    pub fn bounce_rate(&self) -> f64 {
        ratio(self.previous.bounced + self.current.bounced, self.sent())
    }

    pub fn complaint_rate(&self) -> f64 {
        ratio(
            self.previous.complained + self.current.complained,
            self.sent(),
        )
    }
}

fn ratio(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        (n as f64 / of as f64).min(1.0)
    }
}

pub fn load(store: &dyn Store, p: ProjectId) -> Result<Window> {
    match store.get(&keys::reputation(p))? {
        Some(b) => codec::decode(&b),
        None => Ok(Window::default()),
    }
}

/// Counts an outcome in `batch` (once per batch: it reads the stored window).
pub fn count(
    batch: &mut Batch,
    store: &dyn Store,
    p: ProjectId,
    change: impl FnOnce(&mut Tally),
) -> Result<()> {
    let mut w = load(store, p)?;
    change(&mut w.current);
    if w.current.sent >= WINDOW {
        w.previous = w.current;
        w.current = Tally::default();
    }
    batch.put(keys::reputation(p), codec::encode(&w)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_rolls_after_a_thousand_and_keeps_the_tally_before() {
        let mut w = Window::default();
        for i in 0..WINDOW {
            w.current.sent += 1;
            if i % 10 == 0 {
                w.current.bounced += 1;
            }
        }
        assert!((w.bounce_rate() - 0.1).abs() < 1e-9);
        // What `count` does at the thousandth.
        w.previous = w.current;
        w.current = Tally {
            sent: 1000,
            bounced: 0,
            complained: 3,
        };
        assert!((w.bounce_rate() - 0.05).abs() < 1e-9);
        assert!((w.complaint_rate() - 0.0015).abs() < 1e-9);
        assert_eq!(Window::default().bounce_rate(), 0.0);
    }
}
