//! The embedded store: one sled tree, with group-committed flushes.

use std::path::Path;
use std::sync::Arc;

use super::group_commit::GroupCommit;
use super::{Batch, Durable, KvIter, Op, Store};
use crate::error::{Error, Result};

pub struct SledStore {
    db: sled::Db,
    commits: GroupCommit,
}

impl SledStore {
    /// Opens (or creates) the store. A directory held by another process gives
    /// `Error::Locked` rather than a panic, so the CLI can say what to do.
    pub fn open(path: &Path, cache_capacity_bytes: u64) -> Result<Arc<Self>> {
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(cache_capacity_bytes)
            .open()
            .map_err(|e| match e {
                sled::Error::Io(ref io)
                    if io.kind() == std::io::ErrorKind::WouldBlock
                        || io.to_string().contains("lock") =>
                {
                    Error::Locked {
                        path: path.display().to_string(),
                    }
                }
                other => Error::Storage(format!("opening {}: {other}", path.display())),
            })?;
        let flusher = db.clone();
        let commits = GroupCommit::start(move || flusher.flush().map(|_| ()).map_err(Error::from));
        Ok(Arc::new(SledStore { db, commits }))
    }
}

impl Drop for SledStore {
    fn drop(&mut self) {
        self.commits.stop();
    }
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?.map(|v| v.to_vec()))
    }

    fn scan<'a>(&'a self, prefix: &[u8], after: Option<&[u8]>, reverse: bool) -> KvIter<'a> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let start = prefix.to_vec();
        let end = prefix_end(prefix);
        let lower = match (after, reverse) {
            (Some(a), false) => Excluded(a.to_vec()),
            _ => Included(start),
        };
        let upper = match (after, reverse, end) {
            (Some(a), true, _) => Excluded(a.to_vec()),
            (_, _, Some(e)) => Excluded(e),
            (_, _, None) => Unbounded,
        };
        let range = self.db.range::<Vec<u8>, _>((lower, upper));
        let map = |r: sled::Result<(sled::IVec, sled::IVec)>| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(Error::from)
        };
        if reverse {
            Box::new(range.rev().map(map))
        } else {
            Box::new(range.map(map))
        }
    }

    fn apply(&self, batch: Batch) -> Result<()> {
        let mut b = sled::Batch::default();
        for op in batch.into_ops() {
            match op {
                Op::Put(k, v) => b.insert(k, v),
                Op::Delete(k) => b.remove(k),
            }
        }
        self.db.apply_batch(b)?;
        Ok(())
    }

    fn durable(&self) -> Durable {
        Box::pin(self.commits.wait())
    }

    fn flush_blocking(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

/// The smallest key greater than every key that starts with `prefix`.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Arc<SledStore>) {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), 8 << 20).unwrap();
        (dir, s)
    }

    fn keys(it: KvIter<'_>) -> Vec<String> {
        it.map(|r| String::from_utf8(r.unwrap().0).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn scan_walks_a_prefix_both_ways_from_a_cursor() {
        let (_d, s) = store();
        let mut b = Batch::new();
        for k in ["a/1", "a/2", "a/3", "b/1"] {
            b.put(k.as_bytes(), b"v".to_vec());
        }
        s.apply(b).unwrap();
        s.durable().await.unwrap();
        assert_eq!(keys(s.scan(b"a/", None, false)), ["a/1", "a/2", "a/3"]);
        assert_eq!(keys(s.scan(b"a/", None, true)), ["a/3", "a/2", "a/1"]);
        assert_eq!(keys(s.scan(b"a/", Some(b"a/2"), true)), ["a/1"]);
        assert_eq!(keys(s.scan(b"a/", Some(b"a/2"), false)), ["a/3"]);
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_refused_as_locked() {
        let (dir, _s) = store();
        match SledStore::open(dir.path(), 8 << 20) {
            Err(Error::Locked { .. }) => {}
            Err(other) => panic!("expected Locked, got {other:?}"),
            Ok(_) => panic!("expected Locked, got a second handle"),
        }
    }
}
