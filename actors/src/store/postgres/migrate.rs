//! From one machine to a cluster: every pair of a store (a sled data directory, or a
//! backup read through one) copied into an empty PostgreSQL schema, in key order, a
//! batch at a time. Each batch commits with a marker of the last key it holds
//! (`MARKER`), in the same transaction, so a migration that stops (a crash, ^C, a lost
//! connection) goes on after that key when it is run again; the last batch deletes
//! the marker. A schema that holds anything but its layout mark and no marker is
//! refused, and so is a marker left by a migration from another store
//! (`fingerprint`): this never merges two stores.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::store::{keys, Batch, KvPair, Store};

/// The last source key a migration has committed, while it is under way.
pub const MARKER: &[u8] = b"meta/migrated-through";

/// Which store a migration under way comes from (`fingerprint`), beside the marker.
pub const SOURCE: &[u8] = b"meta/migrated-from";

/// What tells one store from another: the SHA-256 of its link key (random, made once
/// per store), or of its first thousand keys when it never made one.
pub fn fingerprint(source: &dyn Store) -> Result<Vec<u8>> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    match source.get(keys::LINK_KEY)? {
        Some(key) => h.update(&key),
        None => {
            for kv in source.scan(b"", None, false).take(1000) {
                h.update(kv?.0);
            }
        }
    }
    Ok(h.finalize().to_vec())
}

/// What a run moved.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Moved {
    pub pairs: u64,
    /// Pairs per kind of record (`keys::kind_of`).
    pub kinds: BTreeMap<&'static str, u64>,
    /// The run went on after this many pairs' worth of an earlier run (None: it began
    /// at the start).
    pub resumed_after: Option<String>,
}

/// Where a run from the store `source` (its `fingerprint`) begins: after the marker of
/// an interrupted run from it, or at the start of an empty target. Err for a target that
/// holds another store, or another store's unfinished migration.
pub fn resume_point(target: &dyn Store, source: &[u8]) -> Result<Option<Vec<u8>>> {
    if let Some(last) = target.get(MARKER)? {
        if target.get(SOURCE)?.as_deref() != Some(source) {
            return Err(Error::conflict(
                "the PostgreSQL schema holds an unfinished migration from another store:                  finish it with that store, or migrate into another empty schema",
            ));
        }
        return Ok(Some(last));
    }
    for kv in target.scan(b"", None, false) {
        let (k, _) = kv?;
        if k != keys::FORMAT_KEY {
            return Err(Error::conflict(
                "the PostgreSQL schema holds data already (and no unfinished migration): \
                 migrate into an empty schema (CREATE SCHEMA ... and options=-c \
                 search_path=... in the URL)",
            ));
        }
    }
    Ok(None)
}

/// Copies `pairs` (in key order, all after the resume point) into `target`, `per_batch`
/// at a time, each batch durable with the marker before the next; `report` hears the
/// count after each.
pub fn copy(
    pairs: impl Iterator<Item = Result<KvPair>>,
    target: &dyn Store,
    source: &[u8],
    resumed_after: Option<&[u8]>,
    per_batch: usize,
    report: &mut dyn FnMut(&Moved),
) -> Result<Moved> {
    let mut moved = Moved {
        resumed_after: resumed_after.map(|k| String::from_utf8_lossy(k).into_owned()),
        ..Moved::default()
    };
    let mut batch = Batch::new();
    let mut in_batch = 0;
    for kv in pairs {
        let (k, v) = kv?;
        // The target has its own layout mark (the same: the source is migrated to this
        // version's layout first), and a source never holds a marker of its own.
        if k == keys::FORMAT_KEY || k == MARKER || k == SOURCE {
            continue;
        }
        *moved.kinds.entry(keys::kind_of(&k)).or_default() += 1;
        moved.pairs += 1;
        in_batch += 1;
        if in_batch == per_batch.max(1) {
            batch.put(MARKER.to_vec(), k.clone());
            batch.put(SOURCE.to_vec(), source.to_vec());
            batch.put(k, v);
            commit(target, std::mem::take(&mut batch))?;
            in_batch = 0;
            report(&moved);
        } else {
            batch.put(k, v);
        }
    }
    batch.delete(MARKER.to_vec());
    batch.delete(SOURCE.to_vec());
    commit(target, batch)?;
    report(&moved);
    Ok(moved)
}

fn commit(target: &dyn Store, batch: Batch) -> Result<()> {
    target.apply(batch)?;
    target.flush_blocking()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::postgres::{PostgresConfig, PostgresStore};
    use crate::store::SledStore;

    async fn target() -> Option<PostgresConfig> {
        super::super::tests::config().await
    }

    fn pairs(n: u32) -> Vec<KvPair> {
        (0..n)
            .map(|i| (format!("k/{i:05}").into_bytes(), vec![i as u8; 3]))
            .collect()
    }

    #[tokio::test]
    async fn a_migration_stopped_half_way_goes_on_after_its_last_batch_and_moves_each_pair_once() {
        let Some(config) = target().await else { return };
        let source = pairs(1_000);
        {
            let pg = PostgresStore::open(&config).unwrap();
            assert_eq!(resume_point(&*pg, b"one").unwrap(), None, "an empty schema");
            // The source fails at its 450th pair: four batches of 100 are in.
            let failing = source.iter().cloned().enumerate().map(|(i, kv)| {
                if i == 450 {
                    Err(Error::storage("the disk went away"))
                } else {
                    Ok(kv)
                }
            });
            assert!(copy(failing, &*pg, b"one", None, 100, &mut |_| {}).is_err());
        }
        let pg = PostgresStore::open(&config).unwrap();
        let other = resume_point(&*pg, b"another").unwrap_err();
        assert!(other.to_string().contains("another store"), "{other}");
        let after = resume_point(&*pg, b"one").unwrap().expect("a marker");
        assert_eq!(after, b"k/00399".to_vec());
        let rest = source
            .iter()
            .filter(|(k, _)| k.as_slice() > after.as_slice())
            .cloned()
            .map(Ok);
        let moved = copy(rest, &*pg, b"one", Some(&after), 100, &mut |_| {}).unwrap();
        assert_eq!(moved.pairs, 600);
        assert_eq!(
            pg.get(MARKER).unwrap(),
            None,
            "the marker goes with the last batch"
        );
        assert_eq!(
            pg.get(SOURCE).unwrap(),
            None,
            "and the source's fingerprint"
        );
        let pg = PostgresStore::open(&config).unwrap();
        let got: Vec<KvPair> = pg.scan(b"k/", None, false).map(|kv| kv.unwrap()).collect();
        assert_eq!(got, source);
    }

    #[tokio::test]
    async fn a_schema_that_holds_another_store_is_refused() {
        let Some(config) = target().await else { return };
        let pg = PostgresStore::open(&config).unwrap();
        let mut b = Batch::new();
        b.put(b"projects/x".to_vec(), b"y".to_vec());
        pg.apply(b).unwrap();
        pg.flush_blocking().unwrap();
        let e = resume_point(&*pg, b"one").unwrap_err();
        assert!(e.to_string().contains("holds data already"), "{e}");
    }

    #[test]
    fn kinds_are_counted_from_a_sled_store() {
        let dir = tempfile::tempdir().unwrap();
        let sled = SledStore::open(dir.path(), 8 << 20).unwrap();
        let p = crate::model::ProjectId::new();
        let mut b = Batch::new();
        b.put(keys::project(p), b"p".to_vec());
        b.put(
            keys::contact(p, crate::model::ContactId::new()),
            b"c".to_vec(),
        );
        sled.apply(b).unwrap();
        let target_dir = tempfile::tempdir().unwrap();
        let target = SledStore::open(target_dir.path(), 8 << 20).unwrap();
        let moved = copy(
            sled.scan(b"", None, false),
            &*target,
            b"one",
            None,
            10,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(moved.kinds.get("projects"), Some(&1));
        assert_eq!(moved.kinds.get("contacts"), Some(&1));
        assert_eq!(moved.pairs, 2, "the layout mark is not moved: {moved:?}");
    }
}
