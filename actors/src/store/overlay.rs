//! Writes that are visible but not yet in sled. A write goes here and into the
//! write-ahead log's pending bytes at once; the flusher syncs the log, and the mover
//! (see `mover`) then applies synced groups to sled, several at a time, in one batch.
//! sled rolls its IO buffer twice for every batch it applies (`pin_log`), so few
//! batches instead of one per write is what makes durable writes cheap; and because
//! sled only ever receives writes whose log records are already synced, its files never
//! hold a write that the log lacks.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{KvPair, Op};

/// The latest value of each key written since the last move into sled (None = deleted),
/// with a version so that a move only clears what it moved.
#[derive(Default)]
pub struct Overlay {
    map: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>,
    version: u64,
}

pub type Snapshot = Vec<(Vec<u8>, u64, Option<Vec<u8>>)>;

/// Entries of a range (None = deleted here), in key order.
pub(crate) type Entries = Vec<(Vec<u8>, Option<Vec<u8>>)>;

impl Overlay {
    pub fn apply(&mut self, ops: Vec<Op>) {
        for op in ops {
            self.version += 1;
            let (k, v) = match op {
                Op::Put(k, v) => (k, Some(v)),
                Op::Delete(k) => (k, None),
            };
            self.map.insert(k, (self.version, v));
        }
    }

    /// The version of the latest write.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Forgets `keys` where their latest write is at most `upto` (now in sled); a key
    /// written again since stays, with its newer value.
    pub fn moved_upto<'a>(&mut self, keys: impl Iterator<Item = &'a Vec<u8>>, upto: u64) {
        for k in keys {
            if self.map.get(k).is_some_and(|(v, _)| *v <= upto) {
                self.map.remove(k);
            }
        }
    }

    /// Forgets every entry whose key passes `drop` (writes that will never be stored);
    /// answers how many.
    pub fn forget(&mut self, drop: impl Fn(&[u8]) -> bool) -> usize {
        let before = self.map.len();
        self.map.retain(|k, _| !drop(k));
        before - self.map.len()
    }

    /// Some(None) when the key was deleted here, None when the overlay knows nothing.
    pub fn get(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        self.map.get(key).map(|(_, v)| v.clone())
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.map
            .iter()
            .map(|(k, (ver, v))| (k.clone(), *ver, v.clone()))
            .collect()
    }

    /// The entries within the bounds, in key order or reversed.
    pub fn range(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        self.range_synced(lower, upper, reverse, u64::MAX)
    }

    /// Like `range`, but a key whose latest write came after version `synced` (not yet
    /// in the log on disk) is hidden: its durable value is unknown (an earlier write
    /// here, or the base's copy, which sled's mover may not have brought up to date), and
    /// a reader that acted on the base's copy ran a workflow step on a state a crash
    /// could take back. Deletions are kept whenever they were made, so that what a
    /// reader of durable entries acts on never includes one that is already gone.
    fn range_synced(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
        synced: u64,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let it = self
            .map
            .range((lower, upper))
            .map(move |(k, (ver, v))| (k.clone(), v.clone().filter(|_| *ver <= synced)));
        if reverse {
            it.rev().collect()
        } else {
            it.collect()
        }
    }

    /// Like `range_synced` forward, for a reader that must not pass over a durable entry
    /// (`Store::scan_durable_in_order`): it ends before the first key whose latest write
    /// came after `synced`, and answers that key. The overlay keeps only a key's latest
    /// value, so such a key's durable value (an earlier write here, or the base's) is
    /// unknown; entries after it would let a cursor move past entries it never saw.
    fn range_synced_in_order(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        synced: u64,
    ) -> (Entries, Option<Vec<u8>>) {
        let mut out = Vec::new();
        for (k, (ver, v)) in self.map.range((lower, upper)) {
            // An unsynced deletion does not stop the walk: the only deletions in a
            // block list are pruning (below every cursor) and erasure (its events are
            // read again before they are sent, and are gone).
            if v.is_some() && *ver > synced {
                return (out, Some(k.clone()));
            }
            out.push((k.clone(), v.clone()));
        }
        (out, None)
    }

    /// What a scan over the overlay takes between the bounds: every latest value
    /// (`synced` = u64::MAX), or the durable view (`range_synced`), or, `in_order`
    /// (forward only), the durable view up to the first key rewritten since, with that
    /// key (`range_synced_in_order`). One place for both stores' scans.
    pub(crate) fn view(
        &self,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
        reverse: bool,
        synced: u64,
        in_order: bool,
    ) -> (Entries, Option<Vec<u8>>) {
        if self.map.is_empty() {
            (Vec::new(), None)
        } else if in_order {
            self.range_synced_in_order(lower.clone(), upper.clone(), synced)
        } else {
            let all = self.range_synced(lower.clone(), upper.clone(), reverse, synced);
            (all, None)
        }
    }
}

/// Ends a forward walk at `stop` (inclusive): the base's copy of that key was durable
/// once, though it may be older than the key's durable value (sled's mover lags the
/// log's sync); for a block of appended entries it holds a prefix of them, and the keys
/// after it are left for a later walk.
pub(crate) fn until(
    merged: impl Iterator<Item = crate::error::Result<KvPair>>,
    stop: Option<Vec<u8>>,
) -> impl Iterator<Item = crate::error::Result<KvPair>> {
    merged.take_while(move |r| match (r, &stop) {
        (Ok((k, _)), Some(s)) => k <= s,
        _ => true,
    })
}

type Peeked = std::iter::Peekable<std::vec::IntoIter<(Vec<u8>, Option<Vec<u8>>)>>;

/// Merges overlay entries over a sled range walked in the same direction: the overlay wins
/// on equal keys, and its deletions hide sled's entries.
pub struct Merge<I: Iterator> {
    overlay: Peeked,
    base: std::iter::Peekable<I>,
    reverse: bool,
}

impl<I> Merge<I>
where
    I: Iterator<Item = crate::error::Result<KvPair>>,
{
    pub fn new(overlay: Vec<(Vec<u8>, Option<Vec<u8>>)>, base: I, reverse: bool) -> Self {
        Merge {
            overlay: overlay.into_iter().peekable(),
            base: base.peekable(),
            reverse,
        }
    }
}

impl<I> Iterator for Merge<I>
where
    I: Iterator<Item = crate::error::Result<KvPair>>,
{
    type Item = crate::error::Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let take_overlay = match (self.overlay.peek(), self.base.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(_), Some(Err(_))) => false,
                (Some((ok, _)), Some(Ok((bk, _)))) => {
                    if ok == bk {
                        self.base.next();
                        true
                    } else {
                        (ok < bk) != self.reverse
                    }
                }
            };
            if take_overlay {
                let (k, v) = self.overlay.next()?;
                if let Some(v) = v {
                    return Some(Ok((k, v)));
                }
            } else {
                return self.base.next();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(keys: &[&str]) -> impl Iterator<Item = crate::error::Result<KvPair>> {
        keys.iter()
            .map(|k| Ok((k.as_bytes().to_vec(), b"sled".to_vec())))
            .collect::<Vec<_>>()
            .into_iter()
    }

    fn collect(m: impl Iterator<Item = crate::error::Result<KvPair>>) -> Vec<(String, String)> {
        m.map(|r| {
            let (k, v) = r.unwrap();
            (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
        })
        .collect()
    }

    #[test]
    fn the_overlay_wins_and_hides_deleted_keys_in_both_directions() {
        let mut o = Overlay::default();
        o.apply(vec![
            Op::Put(b"b".to_vec(), b"new".to_vec()),
            Op::Delete(b"c".to_vec()),
            Op::Put(b"e".to_vec(), b"new".to_vec()),
        ]);
        let fwd = Merge::new(
            o.range(Bound::Unbounded, Bound::Unbounded, false),
            base(&["a", "b", "c", "d"]),
            false,
        );
        assert_eq!(
            collect(fwd),
            [("a", "sled"), ("b", "new"), ("d", "sled"), ("e", "new")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        let rev = Merge::new(
            o.range(Bound::Unbounded, Bound::Unbounded, true),
            base(&["d", "c", "b", "a"]),
            true,
        );
        let keys: Vec<String> = collect(rev).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["e", "d", "b", "a"]);
    }

    #[test]
    fn a_move_keeps_keys_written_again_since_the_synced_version() {
        let mut o = Overlay::default();
        o.apply(vec![
            Op::Put(b"k".to_vec(), b"1".to_vec()),
            Op::Put(b"j".to_vec(), b"1".to_vec()),
        ]);
        let upto = o.version();
        o.apply(vec![Op::Put(b"k".to_vec(), b"2".to_vec())]);
        o.moved_upto([b"k".to_vec(), b"j".to_vec()].iter(), upto);
        assert_eq!(o.get(b"k"), Some(Some(b"2".to_vec())));
        assert_eq!(o.get(b"j"), None);
    }
}
