//! One page of records stored under `prefix` + their 16-byte id, newest first: how the
//! lists of segments, campaigns and workflows page (API.md section 1). The cursor is
//! the id of the last record of the previous page, so inserts and deletes never make a
//! page skip or repeat a record.

use super::{keys, Store};
use crate::error::{Error, FieldCode, Result};
use crate::model::{Page, PageRequest};

/// `total` is the caller's count (a counter kept with the records).
pub fn newest_first<T>(
    store: &dyn Store,
    prefix: &[u8],
    page: &PageRequest,
    total: u64,
    decode: impl Fn(&[u8]) -> Result<T>,
    id: impl Fn(&T) -> String,
) -> Result<Page<T>> {
    let after = match page.cursor() {
        Some(c) => {
            let cursor = uuid::Uuid::parse_str(c)
                .map_err(|_| Error::field("cursor", FieldCode::Custom, "Invalid cursor"))?;
            Some(keys::with_id(prefix, cursor.as_bytes()))
        }
        None => None,
    };
    let mut items = Vec::with_capacity(page.limit() + 1);
    for kv in store
        .scan(prefix, after.as_deref(), true)
        .take(page.limit() + 1)
    {
        items.push(decode(&kv?.1)?);
    }
    Ok(Page::of(items, page, total, id))
}
