//! The contact table's columns: what a count reads instead of the rows.
//!
//! A count that reads every row touches a million scattered allocations, decodes each
//! and parses its `data` JSON for the keys its filter names: most of its time is
//! getting from a row to two values (docs/performance.md, "memberCount"). The columns
//! hold those values slot by slot, in the rows' order: the id, the subscription flag and
//! the two times of each contact, and, for each top-level `data` key a count asked
//! about, a code per row into the key's distinct values (`DataColumn`). A count then
//! walks a few contiguous arrays, and a condition on `data.plan` compares one of a
//! handful of values that stay in the cache.
//!
//! They are built when a project's first count needs them (so a project nobody counts
//! keeps none), a `data` column when a count first names its key, and from then on
//! every insert and remove of the table keeps them beside the rows. A key with more
//! than `MAX_DISTINCT` values (an id, a counter), or values larger than
//! `MAX_DISTINCT_BYTES` in all, makes no column: counts that name it read the rows, as
//! before. Cost: 33 bytes a contact for the first four columns, and
//! 4 bytes a contact for each `data` column (plus its distinct values).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::Result;
use crate::model::pick::pick;
use crate::model::{ContactId, ContactRef};

/// A `data` key with more distinct values than this gets no column.
pub const MAX_DISTINCT: usize = 4096;
/// Nor one whose distinct values take more than this (their JSON text, counted twice:
/// the value and its index entry), so that a tenant's large values cost no more memory
/// than this per column.
pub const MAX_DISTINCT_BYTES: usize = 1 << 20;
/// At most this many `data` columns per table; a count naming a key past them reads
/// the rows.
pub const MAX_DATA_COLUMNS: usize = 16;

/// One top-level `data` key's value in every row, as a code into its distinct values
/// (code 0: the row has no such key).
pub struct DataColumn {
    codes: Vec<u32>,
    values: Vec<Option<Value>>,
    /// A value's JSON text to its code.
    index: HashMap<String, u32>,
    /// What the distinct values take, about (`MAX_DISTINCT_BYTES`).
    bytes: usize,
}

impl DataColumn {
    fn new() -> Self {
        DataColumn {
            codes: Vec::new(),
            values: vec![None],
            index: HashMap::new(),
            bytes: 0,
        }
    }

    /// The value of row `slot`.
    pub fn value(&self, slot: usize) -> Option<&Value> {
        self.values[self.codes[slot] as usize].as_ref()
    }

    /// The code of `v`, a new one if it is new; None past `MAX_DISTINCT` values.
    fn code(&mut self, v: Option<Value>) -> Option<u32> {
        let Some(v) = v else { return Some(0) };
        let text = v.to_string();
        if let Some(&c) = self.index.get(&text) {
            return Some(c);
        }
        self.bytes += 2 * text.len() + 64;
        if self.values.len() > MAX_DISTINCT || self.bytes > MAX_DISTINCT_BYTES {
            return None;
        }
        let c = self.values.len() as u32;
        self.values.push(Some(v));
        self.index.insert(text, c);
        Some(c)
    }

    /// `other`'s rows after these, its codes turned into ours; false past
    /// `MAX_DISTINCT` values.
    fn append(&mut self, other: DataColumn) -> bool {
        let mut to_ours = Vec::with_capacity(other.values.len());
        for v in other.values {
            match self.code(v) {
                Some(c) => to_ours.push(c),
                None => return false,
            }
        }
        self.codes
            .extend(other.codes.iter().map(|&c| to_ours[c as usize]));
        true
    }

    fn heap_bytes(&self) -> usize {
        self.codes.capacity() * 4 + self.values.capacity() * 32 + self.index.capacity() * 48
    }
}

/// The columns of every row, slot by slot.
#[derive(Default)]
pub struct Columns {
    ids: Vec<ContactId>,
    subscribed: Vec<bool>,
    created_at: Vec<i64>,
    updated_at: Vec<i64>,
    data: HashMap<String, DataColumn>,
    /// Keys found to have too many values: never tried again (until a reload).
    unfit: HashSet<String>,
}

/// What a count reads: the columns, and the `data` columns of the keys it asked for,
/// in that order.
pub struct ColumnView<'a> {
    pub ids: &'a [ContactId],
    pub subscribed: &'a [bool],
    pub created_at: &'a [i64],
    pub updated_at: &'a [i64],
    pub data: Vec<&'a DataColumn>,
}

impl ColumnView<'_> {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl Columns {
    /// What a count lacks, read from `rows` in one pass (one decode of each row): the
    /// first four columns when `base`, and the column of each of `keys` (None for a key
    /// with too many values).
    pub fn build(
        rows: &[impl AsRef<[u8]>],
        base: bool,
        keys: &[String],
    ) -> Result<(Option<Columns>, Vec<Option<DataColumn>>)> {
        let n = if base { rows.len() } else { 0 };
        let mut c = Columns {
            ids: Vec::with_capacity(n),
            subscribed: Vec::with_capacity(n),
            created_at: Vec::with_capacity(n),
            updated_at: Vec::with_capacity(n),
            ..Columns::default()
        };
        let mut cols: Vec<Option<DataColumn>> = keys
            .iter()
            .map(|_| {
                let mut col = DataColumn::new();
                col.codes.reserve(rows.len());
                Some(col)
            })
            .collect();
        let mut out = vec![None; keys.len()];
        for row in rows {
            let r = ContactRef::decode(row.as_ref())?;
            if base {
                c.ids.push(r.id);
                c.subscribed.push(r.subscribed);
                c.created_at.push(r.created_at);
                c.updated_at.push(r.updated_at);
            }
            if keys.is_empty() {
                continue;
            }
            pick(r.data, keys, &mut out);
            for (slot, v) in cols.iter_mut().zip(out.iter_mut()) {
                if let Some(col) = slot {
                    match col.code(v.take()) {
                        Some(code) => col.codes.push(code),
                        None => *slot = None,
                    }
                }
            }
        }
        Ok((base.then_some(c), cols))
    }

    /// `build` over parts of `rows` on up to `threads` threads at once, the parts then
    /// joined in order (each part's codes turned into the first part's).
    pub fn build_parts(
        rows: &[impl AsRef<[u8]> + Sync],
        base: bool,
        keys: &[String],
        threads: usize,
    ) -> Result<(Option<Columns>, Vec<Option<DataColumn>>)> {
        if threads < 2 || rows.len() < 50_000 {
            return Self::build(rows, base, keys);
        }
        let size = rows.len().div_ceil(threads);
        let parts: Vec<std::thread::Result<Result<_>>> = std::thread::scope(|s| {
            let handles: Vec<_> = rows
                .chunks(size)
                .map(|chunk| s.spawn(move || Self::build(chunk, base, keys)))
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut joined: Option<(Option<Columns>, Vec<Option<DataColumn>>)> = None;
        for part in parts {
            let (b, cols) =
                part.map_err(|_| crate::error::Error::Internal("a column build panicked".into()))??;
            let Some((jb, jcols)) = &mut joined else {
                joined = Some((b, cols));
                continue;
            };
            if let (Some(jb), Some(b)) = (jb.as_mut(), b) {
                jb.ids.extend(b.ids);
                jb.subscribed.extend(b.subscribed);
                jb.created_at.extend(b.created_at);
                jb.updated_at.extend(b.updated_at);
            }
            for (slot, col) in jcols.iter_mut().zip(cols) {
                let merged = match (slot.take(), col) {
                    (Some(mut into), Some(from)) => into.append(from).then_some(into),
                    _ => None,
                };
                *slot = merged;
            }
        }
        Ok(joined.unwrap_or_else(|| {
            (
                base.then(Columns::default),
                keys.iter().map(|_| None).collect(),
            )
        }))
    }

    /// Whether every key of `keys` has a column.
    pub fn has(&self, keys: &[String]) -> bool {
        keys.iter().all(|k| self.data.contains_key(k))
    }

    /// Whether a key of `keys` is one that can have no column.
    pub fn refuses(&self, keys: &[String]) -> bool {
        keys.iter()
            .filter(|k| !self.data.contains_key(*k))
            .any(|k| self.unfit.contains(k) || self.data.len() >= MAX_DATA_COLUMNS)
    }

    pub fn add_data(&mut self, key: &str, col: Option<DataColumn>) {
        match col {
            Some(col) if self.data.len() < MAX_DATA_COLUMNS => {
                self.data.insert(key.to_owned(), col);
            }
            Some(_) => {}
            None => {
                self.unfit.insert(key.to_owned());
            }
        }
    }

    pub fn view(&self, keys: &[String]) -> Option<ColumnView<'_>> {
        let data = keys
            .iter()
            .map(|k| self.data.get(k))
            .collect::<Option<Vec<_>>>()?;
        // Every column has a value per row; should one not, the count reads the rows
        // rather than a wrong column.
        if data.iter().any(|d| d.codes.len() != self.ids.len()) {
            return None;
        }
        debug_assert!(
            self.subscribed.len() == self.ids.len() && self.updated_at.len() == self.ids.len()
        );
        Some(ColumnView {
            ids: &self.ids,
            subscribed: &self.subscribed,
            created_at: &self.created_at,
            updated_at: &self.updated_at,
            data,
        })
    }

    /// Row `slot` is now `row` (`slot` == the length: a new row at the end).
    pub fn set(&mut self, slot: usize, row: &[u8]) -> Result<()> {
        let r = ContactRef::decode(row)?;
        let mut gone = Vec::new();
        if !self.data.is_empty() {
            // One pass over the row's JSON for every column's key.
            let keys: Vec<String> = self.data.keys().cloned().collect();
            let mut out = vec![None; keys.len()];
            pick(r.data, &keys, &mut out);
            for (key, v) in keys.into_iter().zip(out) {
                let Some(col) = self.data.get_mut(&key) else {
                    continue;
                };
                match col.code(v) {
                    Some(code) if slot == col.codes.len() => col.codes.push(code),
                    Some(code) => col.codes[slot] = code,
                    None => gone.push(key),
                }
            }
        }
        for key in gone {
            self.data.remove(&key);
            self.unfit.insert(key);
        }
        if slot == self.ids.len() {
            self.ids.push(r.id);
            self.subscribed.push(r.subscribed);
            self.created_at.push(r.created_at);
            self.updated_at.push(r.updated_at);
        } else {
            self.ids[slot] = r.id;
            self.subscribed[slot] = r.subscribed;
            self.created_at[slot] = r.created_at;
            self.updated_at[slot] = r.updated_at;
        }
        Ok(())
    }

    /// Row `slot` went, and the last row took its place (`Vec::swap_remove`).
    pub fn swap_remove(&mut self, slot: usize) {
        self.ids.swap_remove(slot);
        self.subscribed.swap_remove(slot);
        self.created_at.swap_remove(slot);
        self.updated_at.swap_remove(slot);
        for col in self.data.values_mut() {
            col.codes.swap_remove(slot);
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.ids.capacity() * 16
            + self.subscribed.capacity()
            + (self.created_at.capacity() + self.updated_at.capacity()) * 8
            + self
                .data
                .values()
                .map(DataColumn::heap_bytes)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Contact, DataMap, EmailAddress, Timestamp};
    use serde_json::json;

    #[test]
    fn columns_built_in_parts_read_as_those_built_in_one_pass() {
        let rows: Vec<Vec<u8>> = (0..60_000usize)
            .map(|i| {
                let mut data = DataMap::new();
                // Values that first appear in different parts get different codes there.
                data.insert("plan".into(), json!(format!("p{}", (i * 7919) % 97)));
                if i.is_multiple_of(3) {
                    data.insert("seen".into(), json!(i.is_multiple_of(5)));
                }
                data.insert("id".into(), json!(i));
                Contact {
                    id: ContactId::new(),
                    email: EmailAddress::parse(&format!("c{i}@example.com")).unwrap(),
                    subscribed: i.is_multiple_of(2),
                    data,
                    created_at: Timestamp::from(i as i64),
                    updated_at: Timestamp::from(2 * i as i64),
                }
                .encode()
                .unwrap()
            })
            .collect();
        let keys = ["plan".to_owned(), "seen".to_owned(), "id".to_owned()];
        let (one_base, one) = Columns::build(&rows, true, &keys).unwrap();
        let (parts_base, parts) = Columns::build_parts(&rows, true, &keys, 3).unwrap();
        let (one_base, parts_base) = (one_base.unwrap(), parts_base.unwrap());
        assert_eq!(one_base.ids, parts_base.ids);
        assert_eq!(one_base.subscribed, parts_base.subscribed);
        assert_eq!(one_base.created_at, parts_base.created_at);
        assert_eq!(one_base.updated_at, parts_base.updated_at);
        for k in 0..2 {
            let (a, b) = (one[k].as_ref().unwrap(), parts[k].as_ref().unwrap());
            assert!(
                (0..rows.len()).all(|i| a.value(i) == b.value(i)),
                "{}",
                keys[k]
            );
        }
        assert!(
            one[2].is_none() && parts[2].is_none(),
            "a key of a value per row has no column either way"
        );
    }

    #[test]
    fn a_key_of_few_but_large_values_gets_no_column() {
        let mut col = DataColumn::new();
        let big = |i: usize| Some(json!(format!("{i}{}", "x".repeat(40_000))));
        let codes: Vec<Option<u32>> = (0..30).map(|i| col.code(big(i))).collect();
        assert!(
            codes[..10].iter().all(Option::is_some),
            "the first values fit"
        );
        assert_eq!(
            codes[29], None,
            "30 values of 40 kB pass MAX_DISTINCT_BYTES"
        );
    }
}
