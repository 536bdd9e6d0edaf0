//! The forwarding proofs a node has accepted, each until its window closes: a proof is
//! good for one request, so a captured forwarded request cannot be sent again.

use std::collections::HashMap;
use std::sync::Mutex;

/// Past this many proofs still in their window, new ones are refused (the node then
/// answers forwarded requests 403 until the oldest run out) rather than growing without
/// bound: about 33,000 forwarded requests a second for a 30 s window.
const MAX_REMEMBERED: usize = 1_000_000;

#[derive(Default)]
pub struct ReplayCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// A proof's tag, and when its window closes (ms since the epoch).
    seen: HashMap<[u8; 32], i64>,
    /// The size at which the closed entries are swept out next.
    sweep_at: usize,
}

impl ReplayCache {
    /// True the first time `tag` is shown while its window (until `closes_ms`) is open;
    /// false for a replay, or when the cache is full.
    pub fn first_use(&self, tag: [u8; 32], closes_ms: i64, now_ms: i64) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.seen.len() >= inner.sweep_at {
            inner.seen.retain(|_, closes| *closes > now_ms);
            inner.sweep_at = (inner.seen.len() * 2).max(1024);
        }
        if inner.seen.len() >= MAX_REMEMBERED {
            tracing::warn!(
                remembered = inner.seen.len(),
                "too many forwarding proofs in their window; refusing new ones"
            );
            return false;
        }
        inner.seen.insert(tag, closes_ms).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_is_accepted_once_and_forgotten_after_its_window() {
        let cache = ReplayCache::default();
        assert!(cache.first_use([1; 32], 1_000, 0));
        assert!(!cache.first_use([1; 32], 1_000, 500), "a replay");
        assert!(cache.first_use([2; 32], 1_000, 500));
        // Many later proofs sweep the closed ones out.
        for i in 0..2_000u32 {
            let mut tag = [0; 32];
            tag[..4].copy_from_slice(&i.to_be_bytes());
            tag[31] = 9;
            assert!(cache.first_use(tag, 5_000, 2_000));
        }
        let inner = cache.inner.lock().unwrap();
        assert!(
            !inner.seen.contains_key(&[1; 32]),
            "closed entries are swept"
        );
    }
}
