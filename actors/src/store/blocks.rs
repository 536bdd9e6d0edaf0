//! Append-mostly records kept several to a key: the event log and its by-name index.
//!
//! Every `/v1/track` adds an event, and each event used to be one new key in the event
//! log and one in its name's index, both at the right edge of their ranges. Inserts
//! there were the costliest part of moving writes into sled (every 16 appends split a
//! leaf and copied its parent): measured, leaving out those two keys raised /v1/track
//! by 25-35%. A block holds a run of entries under the key `<prefix><first id>`, so
//! the next entries rewrite the same key, and the mover folds the rewrites of one move
//! into a single sled insert.
//!
//! The rule that makes lookups work: an entry always lives in the block with the
//! greatest key at or below its id (the "floor" block). New blocks start where that
//! rule still holds, so entries may arrive in any order.
//!
//! Every list starts with a head block under the all-zero id, the floor of every id,
//! and the head names the newest block: an append finds its block with one or two
//! point reads, and a new list (a contact's first event) costs one new key.
//!
//! Appends never move an entry. Only an entry older than its list's newest (a clock
//! that stepped back) can split a block in the middle and move entries to a new key; a
//! listing that runs right then, while the mover puts that batch into sled, may see the
//! moved entries twice or not at all (the overlay is read as a snapshot, sled is not).
//! The next read is whole again.

use std::collections::BTreeMap;

use super::{keys, Batch, Store};
use crate::error::{Error, Result};

pub type Id = [u8; 16];
/// One entry: its id, and what it carries (empty for a bare index entry).
pub type Entry = (Id, Vec<u8>);

/// The head block's key within its list.
const HEAD: Id = [0; 16];

/// How large a block may grow before the next entry starts another. Each write puts
/// the whole block in the write-ahead log again, so blocks stay small: the saving is
/// in sled inserts, and it is nearly all had at a handful of entries per block.
#[derive(Debug, Clone, Copy)]
pub struct Blocks {
    pub max_entries: usize,
    pub max_bytes: usize,
}

impl Blocks {
    /// Adds `entries` under `prefix` (an entry with an id already there replaces it),
    /// and puts every block it changed into `batch`.
    pub fn insert(
        &self,
        store: &dyn Store,
        batch: &mut Batch,
        prefix: &[u8],
        mut entries: Vec<Entry>,
    ) -> Result<()> {
        entries.sort_by_key(|e| e.0);
        let head = match store.get(&keys::with_id(prefix, &HEAD))? {
            Some(bytes) => Some(decode(&HEAD, &bytes)?),
            None => None,
        };
        let tail = head.as_ref().map(|h| h.0);
        // Blocks changed by this call: a batch cannot read its own writes.
        let mut touched: BTreeMap<Id, Vec<Entry>> = BTreeMap::new();
        let mut head_entries = head.map(|h| h.1);
        for (id, payload) in entries {
            let local = touched.range(..=id).next_back().map(|(k, _)| *k);
            let stored = match tail {
                // The common case, an append: the newest block is the floor.
                Some(HEAD) => head_entries.take().map(|es| (HEAD, es)),
                Some(t) if t <= id => match store.get(&keys::with_id(prefix, &t))? {
                    Some(bytes) => Some((t, decode(&t, &bytes)?.1)),
                    None => return Err(missing(prefix)),
                },
                Some(_) => floor(store, prefix, &id)?,
                None => None,
            };
            let key = match stored {
                Some((stored, _)) if local.is_some_and(|l| l >= stored) => local,
                Some((stored, entries)) => {
                    touched.insert(stored, entries);
                    Some(stored)
                }
                None => local,
            };
            let block = touched.entry(key.unwrap_or(HEAD)).or_default();
            match block.binary_search_by(|e| e.0.cmp(&id)) {
                Ok(i) => block[i].1 = payload,
                Err(i) => block.insert(i, (id, payload)),
            }
            if let Some(split) = self.split(block, &id) {
                touched.insert(split[0].0, split);
            }
        }
        let newest = touched.last_key_value().map(|(k, _)| *k);
        let new_tail = match (tail, newest) {
            (Some(t), Some(n)) => t.max(n),
            (t, n) => t.or(n).unwrap_or(HEAD),
        };
        if tail != Some(new_tail) && !touched.contains_key(&HEAD) {
            // The head must name the new tail: write it again, with its entries.
            let entries = match head_entries {
                Some(es) => es,
                None => match store.get(&keys::with_id(prefix, &HEAD))? {
                    Some(bytes) => decode(&HEAD, &bytes)?.1,
                    None => Vec::new(),
                },
            };
            touched.insert(HEAD, entries);
        }
        for (first, block) in &touched {
            let value = encode((*first == HEAD).then_some(&new_tail), block);
            batch.put(keys::with_id(prefix, first), value);
        }
        Ok(())
    }

    /// When `block` is over its limits, takes the entries that start a new block: the
    /// entry just added when it is the newest (appends start a fresh block and leave
    /// the full one alone), otherwise the upper half.
    fn split(&self, block: &mut Vec<Entry>, added: &Id) -> Option<Vec<Entry>> {
        let bytes: usize = block.iter().map(|e| e.1.len()).sum();
        if block.len() < 2 || (block.len() <= self.max_entries && bytes <= self.max_bytes) {
            return None;
        }
        let at = if block.last().is_some_and(|e| &e.0 == added) {
            block.len() - 1
        } else {
            block.len() / 2
        };
        Some(block.split_off(at))
    }
}

/// Takes the entries with these ids out of the list under `prefix` (an erasure), and
/// puts every block it changed into `batch`; answers how many it found. A block left
/// empty goes, except the head and the newest (the head names the newest): they stay,
/// empty, and later entries fill them as before.
pub fn remove(store: &dyn Store, batch: &mut Batch, prefix: &[u8], ids: &[Id]) -> Result<usize> {
    let tail = match store.get(&keys::with_id(prefix, &HEAD))? {
        Some(bytes) => decode(&HEAD, &bytes)?.0,
        None => return Ok(0),
    };
    // Removing never adds a block, so the stored floor is each id's block; the ones
    // changed so far are kept here, since a batch cannot read its own writes.
    let mut touched: BTreeMap<Id, Vec<Entry>> = BTreeMap::new();
    let mut found = 0;
    for id in ids {
        let Some((first, stored)) = floor(store, prefix, id)? else {
            continue;
        };
        let block = touched.entry(first).or_insert(stored);
        if let Ok(i) = block.binary_search_by(|e| e.0.cmp(id)) {
            block.remove(i);
            found += 1;
        }
    }
    for (first, block) in &touched {
        if block.is_empty() && *first != HEAD && *first != tail {
            batch.delete(keys::with_id(prefix, first));
        } else {
            let value = encode((*first == HEAD).then_some(&tail), block);
            batch.put(keys::with_id(prefix, first), value);
        }
    }
    Ok(found)
}

/// The entry with this id, if any.
pub fn get(store: &dyn Store, prefix: &[u8], id: &Id) -> Result<Option<Vec<u8>>> {
    let Some((_, mut block)) = floor(store, prefix, id)? else {
        return Ok(None);
    };
    Ok(block
        .binary_search_by(|e| e.0.cmp(id))
        .ok()
        .map(|i| block.swap_remove(i).1))
}

/// Entries newest first (descending ids), starting below `before` when it is given.
pub fn iter_rev<'a>(
    store: &'a dyn Store,
    prefix: &[u8],
    before: Option<Id>,
) -> impl Iterator<Item = Result<Entry>> + 'a {
    // The block holding `before` may also hold entries below it, so the walk starts
    // at that block (its key is at or below `before`).
    let from = before.map(|b| at_or_below(prefix, &b));
    let prefix = prefix.to_vec();
    store
        .scan(&prefix, from.as_deref(), true)
        .flat_map(move |kv| {
            let block = kv.and_then(|(k, v)| decode(&first_id(&prefix, &k)?, &v));
            let list: Vec<Result<Entry>> = match block {
                Ok((_, mut es)) => {
                    es.retain(|e| before.is_none_or(|b| e.0 < b));
                    es.into_iter().rev().map(Ok).collect()
                }
                Err(e) => vec![Err(e)],
            };
            list
        })
}

/// Durable entries oldest first (ascending ids), from `from` on (inclusive): what a
/// crash can no longer take back, for a reader that acts on the outside and keeps a
/// cursor (the webhook deliverer). The walk ends at a block rewritten since its last
/// durable write (`Store::scan_durable_in_order`): the head is rewritten whenever a
/// new block begins, and going on past an older copy of it skipped its newer entries.
pub fn iter_durable_from<'a>(
    store: &'a dyn Store,
    prefix: &[u8],
    from: Id,
) -> impl Iterator<Item = Result<Entry>> + 'a {
    // Entries at or above `from` live in its floor block (the last key at or below it)
    // or after it. A scan starts after the key it is given: one byte short of the floor
    // key sorts just before it (and after every block wholly below `from` but for ones
    // sharing 15 bytes of id, whose entries the filter drops).
    let floor = match store
        .scan(prefix, Some(&at_or_below(prefix, &from)), true)
        .next()
    {
        Some(Ok((mut k, _))) => {
            k.truncate(k.len() - 1);
            Some(k)
        }
        _ => None,
    };
    let prefix = prefix.to_vec();
    store
        .scan_durable_in_order(&prefix, floor.as_deref())
        .flat_map(move |kv| {
            let block = kv.and_then(|(k, v)| decode(&first_id(&prefix, &k)?, &v));
            let list: Vec<Result<Entry>> = match block {
                Ok((_, mut es)) => {
                    es.retain(|e| e.0 >= from);
                    es.into_iter().map(Ok).collect()
                }
                Err(e) => vec![Err(e)],
            };
            list
        })
}

/// The oldest entry's id, if any (the head and the newest block may be empty).
pub fn oldest(store: &dyn Store, prefix: &[u8]) -> Result<Option<Id>> {
    for kv in store.scan(prefix, None, false) {
        let (k, v) = kv?;
        let first = first_id(prefix, &k)?;
        if let Some(e) = decode(&first, &v)?.1.first() {
            return Ok(Some(e.0));
        }
    }
    Ok(None)
}

/// Removes the entries below `cutoff`, oldest first and at most `max`, and answers
/// them. An emptied block's key is deleted, except the head's and the newest block's:
/// the head must keep naming a block that exists, and appends find their floor there.
/// Entries keep their blocks, so the floor rule still holds for every one left.
pub fn remove_below(
    store: &dyn Store,
    batch: &mut Batch,
    prefix: &[u8],
    cutoff: &Id,
    max: usize,
) -> Result<Vec<Entry>> {
    let mut removed = Vec::new();
    let mut tail = None;
    for kv in store.scan(prefix, None, false) {
        if removed.len() >= max {
            break;
        }
        let (k, v) = kv?;
        let first = first_id(prefix, &k)?;
        let (newest, mut entries) = decode(&first, &v)?;
        if first == HEAD {
            tail = Some(newest);
        }
        let expired = entries.partition_point(|e| e.0 < *cutoff);
        if entries.is_empty() {
            // The head and the newest block stay when emptied; the walk goes past them.
            continue;
        }
        let take = expired.min(max - removed.len());
        if take == 0 {
            break;
        }
        let rest = entries.split_off(take);
        removed.extend(entries);
        let keep = rest.len();
        if keep == 0 && first != HEAD && Some(first) != tail {
            batch.delete(k);
        } else {
            let head_tail = (first == HEAD).then_some(&newest);
            batch.put(k, encode(head_tail, &rest));
        }
        if keep > 0 {
            break;
        }
    }
    Ok(removed)
}

/// The block whose key is the greatest at or below `id`: where `id` lives, or would.
fn floor(store: &dyn Store, prefix: &[u8], id: &Id) -> Result<Option<(Id, Vec<Entry>)>> {
    match store
        .scan(prefix, Some(&at_or_below(prefix, id)), true)
        .next()
    {
        Some(kv) => {
            let (k, v) = kv?;
            let first = first_id(prefix, &k)?;
            Ok(Some((first, decode(&first, &v)?.1)))
        }
        None => Ok(None),
    }
}

fn first_id(prefix: &[u8], key: &[u8]) -> Result<Id> {
    key.strip_prefix(prefix)
        .and_then(|rest| rest.try_into().ok())
        .ok_or_else(|| Error::storage("a block key without its 16-byte id"))
}

fn missing(prefix: &[u8]) -> Error {
    Error::storage(format!(
        "the newest block of a record list ({}) is missing",
        String::from_utf8_lossy(prefix)
    ))
}

/// A reverse scan bound that keeps the key of `id` itself: scans stop strictly before
/// their bound, and `<prefix><id>\0` sorts right after `<prefix><id>`.
fn at_or_below(prefix: &[u8], id: &Id) -> Vec<u8> {
    let mut k = keys::with_id(prefix, id);
    k.push(0);
    k
}

/// The head block starts with the newest block's id; then, in every block, each
/// entry's id, payload length (u32 little-endian) and payload.
fn encode(tail: Option<&Id>, block: &[Entry]) -> Vec<u8> {
    let size = 16 + block.iter().map(|e| 20 + e.1.len()).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    if let Some(tail) = tail {
        out.extend_from_slice(tail);
    }
    for (id, payload) in block {
        out.extend_from_slice(id);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// The block stored under `first`: (the newest block's id, from the head; else
/// `first` itself) and its entries.
fn decode(first: &Id, mut bytes: &[u8]) -> Result<(Id, Vec<Entry>)> {
    let bad = || Error::storage("a truncated record block");
    let mut tail = *first;
    if *first == HEAD {
        tail = bytes
            .get(..16)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?;
        bytes = &bytes[16..];
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let id: Id = bytes
            .get(..16)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?;
        let len = bytes.get(16..20).ok_or_else(bad)?;
        let len = u32::from_le_bytes(len.try_into().map_err(|_| bad())?) as usize;
        let payload = bytes.get(20..20 + len).ok_or_else(bad)?;
        out.push((id, payload.to_vec()));
        bytes = &bytes[20 + len..];
    }
    Ok((tail, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledStore;

    const SMALL: Blocks = Blocks {
        max_entries: 4,
        max_bytes: 64,
    };
    const PREFIX: &[u8] = b"p/x/e/";

    fn id(n: u16) -> Id {
        let mut id = [0u8; 16];
        id[..2].copy_from_slice(&n.to_be_bytes());
        id
    }

    fn add(store: &dyn Store, ids: &[u16]) {
        let mut batch = Batch::new();
        let entries = ids.iter().map(|&n| (id(n), vec![n as u8])).collect();
        SMALL.insert(store, &mut batch, PREFIX, entries).unwrap();
        store.apply(batch).unwrap();
    }

    fn walk(store: &dyn Store, before: Option<u16>) -> Vec<u16> {
        iter_rev(store, PREFIX, before.map(id))
            .map(|e| u16::from_be_bytes(e.unwrap().0[..2].try_into().unwrap()))
            .collect()
    }

    /// Every block, oldest first.
    fn blocks(store: &dyn Store) -> Vec<Vec<Entry>> {
        store
            .scan(PREFIX, None, false)
            .map(Result::unwrap)
            .map(|(k, v)| decode(&first_id(PREFIX, &k).unwrap(), &v).unwrap().1)
            .collect()
    }

    fn open() -> (tempfile::TempDir, std::sync::Arc<SledStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        (dir, store)
    }

    #[test]
    fn removed_entries_are_gone_from_their_blocks_and_the_rest_still_read_back() {
        let (_dir, store) = open();
        for n in 1..=10 {
            add(&*store, &[n]);
        }
        let mut batch = Batch::new();
        let gone = [id(2), id(5), id(6), id(7), id(8), id(10), id(42)];
        assert_eq!(remove(&*store, &mut batch, PREFIX, &gone).unwrap(), 6);
        store.apply(batch).unwrap();
        assert_eq!(walk(&*store, None), vec![9, 4, 3, 1]);
        add(&*store, &[11, 6]);
        assert_eq!(walk(&*store, None), vec![11, 9, 6, 4, 3, 1]);
        assert_eq!(get(&*store, PREFIX, &id(6)).unwrap(), Some(vec![6]));
        assert_eq!(get(&*store, PREFIX, &id(5)).unwrap(), None);
    }

    #[test]
    fn appended_entries_fill_blocks_and_read_back_newest_first() {
        let (_dir, store) = open();
        for n in 1..=10 {
            add(&*store, &[n]);
        }
        assert_eq!(blocks(&*store).len(), 3, "10 entries at 4 a block");
        assert_eq!(walk(&*store, None), (1..=10).rev().collect::<Vec<_>>());
        assert_eq!(walk(&*store, Some(6)), [5, 4, 3, 2, 1]);
        assert_eq!(get(&*store, PREFIX, &id(7)).unwrap(), Some(vec![7]));
        assert_eq!(get(&*store, PREFIX, &id(11)).unwrap(), None);
    }

    #[test]
    fn entries_out_of_order_and_in_one_batch_are_all_found() {
        let (_dir, store) = open();
        add(&*store, &[50, 10, 30]);
        add(&*store, &[20, 40, 60, 5, 35, 45, 25, 15, 55]);
        add(&*store, &[1]);
        let mut all = vec![1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60];
        for n in &all {
            assert_eq!(get(&*store, PREFIX, &id(*n)).unwrap(), Some(vec![*n as u8]));
        }
        all.reverse();
        assert_eq!(walk(&*store, None), all);
        assert_eq!(walk(&*store, Some(33)), [30, 25, 20, 15, 10, 5, 1]);
        for block in blocks(&*store) {
            assert!(block.len() <= SMALL.max_entries);
        }
    }

    #[test]
    fn a_large_entry_takes_a_block_of_its_own_and_a_same_id_replaces() {
        let (_dir, store) = open();
        add(&*store, &[1]);
        let mut batch = Batch::new();
        SMALL
            .insert(&*store, &mut batch, PREFIX, vec![(id(2), vec![9; 100])])
            .unwrap();
        store.apply(batch).unwrap();
        add(&*store, &[2]);
        assert_eq!(get(&*store, PREFIX, &id(2)).unwrap(), Some(vec![2]));
        assert_eq!(walk(&*store, None), [2, 1]);
    }

    #[test]
    fn a_truncated_block_is_a_storage_error_not_a_panic() {
        let mut bytes = encode(None, &[(id(1), vec![1, 2, 3])]);
        bytes.pop();
        assert!(matches!(decode(&id(1), &bytes), Err(Error::Storage(_))));
        assert!(matches!(decode(&HEAD, &[1, 2]), Err(Error::Storage(_))));
    }
    fn purge_below(store: &dyn Store, below: u16, max: usize) -> Vec<u16> {
        let mut batch = Batch::new();
        let gone = remove_below(store, &mut batch, PREFIX, &id(below), max).unwrap();
        store.apply(batch).unwrap();
        gone.iter()
            .map(|e| u16::from_be_bytes(e.0[..2].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn removing_old_entries_in_slices_keeps_the_rest_findable_and_appendable() {
        let (_dir, store) = open();
        for n in 1..=20 {
            add(&*store, &[n]);
        }
        assert_eq!(
            purge_below(&*store, 8, 3),
            vec![1, 2, 3],
            "a slice stops at its max"
        );
        assert_eq!(purge_below(&*store, 8, 100), vec![4, 5, 6, 7]);
        assert_eq!(
            purge_below(&*store, 8, 100),
            Vec::<u16>::new(),
            "nothing left below"
        );
        assert_eq!(walk(&*store, None), (8..=20).rev().collect::<Vec<_>>());
        assert_eq!(get(&*store, PREFIX, &id(9)).unwrap(), Some(vec![9]));
        assert_eq!(get(&*store, PREFIX, &id(3)).unwrap(), None);
        assert_eq!(oldest(&*store, PREFIX).unwrap(), Some(id(8)));

        assert_eq!(
            purge_below(&*store, 100, 100).len(),
            13,
            "every entry can go"
        );
        assert!(walk(&*store, None).is_empty());
        assert_eq!(
            oldest(&*store, PREFIX).unwrap(),
            None,
            "past the emptied blocks"
        );
        add(&*store, &[30, 2]);
        assert_eq!(
            walk(&*store, None),
            vec![30, 2],
            "the list takes appends again"
        );
        assert!(blocks(&*store).len() <= 3, "emptied blocks were deleted");
    }
}
