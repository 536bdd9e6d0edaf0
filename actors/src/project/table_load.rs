//! Reading a project's stored contacts for its contact table, on several threads: the
//! store's scan is most of a load's time, so the key range is cut at evenly spaced ids
//! between the first contact and the last, and each part is scanned on a thread of its
//! own. Ids are UUID v7, so the cuts fall at evenly spaced creation times: a project
//! whose contacts came in bursts gets uneven parts, never wrong ones.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::Store;

/// A contact's stored bytes, as the table holds them (`table::Row`).
type Row = Arc<[u8]>;

/// Every row under `prefix` in key order, read in up to `parts` parts at once.
pub fn read(store: &dyn Store, prefix: &[u8], parts: usize) -> Result<Vec<Row>> {
    let cuts = cuts(store, prefix, parts)?;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..=cuts.len())
            .map(|i| {
                let after = i.checked_sub(1).map(|j| cuts[j].as_slice());
                let upto = cuts.get(i).map(Vec::as_slice);
                s.spawn(move || part(store, prefix, after, upto))
            })
            .collect();
        let mut parts = Vec::with_capacity(handles.len());
        for h in handles {
            let rows = h
                .join()
                .map_err(|_| Error::Internal("a contact load thread panicked".into()))??;
            parts.push(rows);
        }
        let mut all = Vec::with_capacity(parts.iter().map(Vec::len).sum());
        for rows in parts {
            all.extend(rows);
        }
        Ok(all)
    })
}

/// The rows after `after` (or from the start) up to and with `upto` (or to the end).
fn part(
    store: &dyn Store,
    prefix: &[u8],
    after: Option<&[u8]>,
    upto: Option<&[u8]>,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for kv in store.scan(prefix, after, false) {
        let (k, v) = kv?;
        if upto.is_some_and(|u| k.as_slice() > u) {
            break;
        }
        rows.push(Arc::from(v));
    }
    Ok(rows)
}

/// `parts - 1` keys evenly spaced between the first and the last id under `prefix`;
/// none when there is nothing to cut.
fn cuts(store: &dyn Store, prefix: &[u8], parts: usize) -> Result<Vec<Vec<u8>>> {
    if parts < 2 {
        return Ok(Vec::new());
    }
    let end = |reverse| -> Result<Option<u128>> {
        let Some((k, _)) = store.scan(prefix, None, reverse).next().transpose()? else {
            return Ok(None);
        };
        Ok(k.strip_prefix(prefix)
            .and_then(|id| <[u8; 16]>::try_from(id).ok())
            .map(u128::from_be_bytes))
    };
    let (Some(lo), Some(hi)) = (end(false)?, end(true)?) else {
        return Ok(Vec::new());
    };
    let step = hi.saturating_sub(lo) / parts as u128;
    if step == 0 {
        return Ok(Vec::new());
    }
    Ok((1..parts as u128)
        .map(|i| [prefix, &(lo + step * i).to_be_bytes()].concat())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Batch, SledConfig, SledStore};

    #[tokio::test]
    async fn parts_read_every_row_once_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), SledConfig::default()).unwrap();
        let mut b = Batch::new();
        let ids: Vec<u128> = (0..1_000u128).map(|i| i * i * 7_919).collect();
        for id in &ids {
            b.put(
                [b"c/".as_slice(), &id.to_be_bytes()].concat(),
                id.to_be_bytes().to_vec(),
            );
        }
        b.put(b"d/other".to_vec(), b"not a contact".to_vec());
        store.apply(b).unwrap();
        store.durable().await.unwrap();
        for parts in [1, 2, 3, 4, 7] {
            let rows = read(&*store, b"c/", parts).unwrap();
            let got: Vec<u128> = rows
                .iter()
                .map(|r| u128::from_be_bytes(r[..].try_into().unwrap()))
                .collect();
            assert_eq!(got, ids, "{parts} parts");
        }
    }
}
