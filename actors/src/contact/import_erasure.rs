//! A deleted contact's erasure, import phase: rejected rows that name the address lose
//! it.

use crate::contact::erasure_record::{walk, Erasure, Step};
use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{codec, keys, Batch, Store};

/// Imports whose rejected rows name the address: those rows lose their email cell and
/// reason (their line and the import's counts stay).
pub fn imports(
    store: &dyn Store,
    batch: &mut Batch,
    p: ProjectId,
    erasure: &Erasure,
    left: usize,
) -> Result<Step> {
    walk(store, &keys::imports_of(p), erasure, left, |k, v| {
        let mut import: crate::contact::import::Import = codec::decode(v)?;
        if import.erase_rejected(&erasure.email) {
            batch.put(k.to_vec(), codec::encode(&import)?);
        }
        Ok(())
    })
}
