//! The contact table's columns: what a count reads instead of the rows.
//!
//! A count that reads every row touches a million scattered allocations, decodes each
//! and parses its `data` JSON for the keys its filter names: most of its time is
//! getting from a row to two values (docs/performance.md, "memberCount"). The columns
//! hold those values slot by slot, in the rows' order: the id, the subscription flag and
//! the two times of each contact, and, for each top-level `data` key a count asked
//! about, a code per row into the key's distinct values (`DataColumn`). A count copies
//! the few arrays it needs under the table's read lock (a memory copy: milliseconds at
//! a million contacts), lets the lock go, and walks the copy; a condition on
//! `data.plan` then compares one of a handful of values that stay in the cache.
//!
//! They are built when a project's first count needs them (so a project nobody counts
//! keeps none), a `data` column when a count first names its key, from a copy of the
//! rows outside the lock while the writes that land meanwhile are logged and replayed
//! onto them before they are installed (`ContactTable::with_columns`); from then on
//! every insert and remove keeps them beside the rows. A key with more than
//! `MAX_DISTINCT` values (an id, a counter), or whose values take more than
//! `MAX_DISTINCT_BYTES`, makes no column, nor does a key past `MAX_DATA_COLUMNS`:
//! counts that name one read the rows, as before. Cost: 33 bytes a contact for the
//! first four columns, and 4 bytes a contact for each `data` column (plus its values).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::Result;
use crate::model::pick::pick;
use crate::model::{ContactId, ContactRef};
use crate::parts::in_parts;

/// A `data` key with more distinct values than this gets no column.
pub const MAX_DISTINCT: usize = 4096;
/// Nor one whose distinct values take more memory than this (`value_bytes`, and the
/// index's copy of each as JSON text), so that a tenant's large values cost no more
/// than this per column.
pub const MAX_DISTINCT_BYTES: usize = 1 << 20;
/// At most this many `data` columns per table; a count naming a key past them reads
/// the rows.
pub const MAX_DATA_COLUMNS: usize = 16;

/// About what `v` takes in memory: its `Value` and what that owns.
fn value_bytes(v: &Value) -> usize {
    32 + match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(value_bytes).sum(),
        Value::Object(o) => o.iter().map(|(k, v)| 48 + k.len() + value_bytes(v)).sum(),
        _ => 0,
    }
}

/// One top-level `data` key's value in every row, as a code into its distinct values
/// (code 0: the row has no such key).
pub struct DataColumn {
    codes: Vec<u32>,
    values: Vec<Option<Value>>,
    /// A value's JSON text to its code.
    index: HashMap<String, u32>,
    /// What the distinct values take (`MAX_DISTINCT_BYTES`).
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

    /// A copy to count over: the codes and the values, without the index (a count
    /// makes no code).
    fn for_count(&self) -> DataColumn {
        DataColumn {
            codes: self.codes.clone(),
            values: self.values.clone(),
            index: HashMap::new(),
            bytes: self.bytes,
        }
    }

    /// The code of `v`, a new one if it is new; None past `MAX_DISTINCT` values or
    /// `MAX_DISTINCT_BYTES`.
    fn code(&mut self, v: Option<Value>) -> Option<u32> {
        let Some(v) = v else { return Some(0) };
        let text = v.to_string();
        if let Some(&c) = self.index.get(&text) {
            return Some(c);
        }
        self.bytes += value_bytes(&v) + 2 * text.len() + 64;
        if self.values.len() > MAX_DISTINCT || self.bytes > MAX_DISTINCT_BYTES {
            return None;
        }
        let c = self.values.len() as u32;
        self.values.push(Some(v));
        self.index.insert(text, c);
        Some(c)
    }

    /// `other`'s rows after these, its codes turned into ours; false past the limits.
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

    /// Row `slot` now holds `v` (`slot` == the length: a new row); false past the limits.
    fn set(&mut self, slot: usize, v: Option<Value>) -> bool {
        let Some(code) = self.code(v) else {
            return false;
        };
        match slot == self.codes.len() {
            true => self.codes.push(code),
            false => self.codes[slot] = code,
        }
        true
    }

    fn heap_bytes(&self) -> usize {
        self.codes.capacity() * 4 + self.bytes
    }
}

/// The columns of every row, slot by slot (the first four empty in a `Columns` that
/// only brings new `data` columns to the table's, see `build`).
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

/// What a count walks: its own copy of the columns it needs (`Columns::copy`), so that
/// it holds no lock while it walks. `ids` is empty unless asked for, and so are the
/// times; `data` follows the keys asked for.
pub struct ColumnView {
    pub ids: Vec<ContactId>,
    pub subscribed: Vec<bool>,
    pub created_at: Vec<i64>,
    pub updated_at: Vec<i64>,
    pub data: Vec<DataColumn>,
}

impl ColumnView {
    pub fn len(&self) -> usize {
        self.subscribed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subscribed.is_empty()
    }
}

/// Which of the first four columns a count reads beside the flag.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    pub ids: bool,
    pub times: bool,
}

/// A write that lands while columns are built from a copy of the rows, replayed onto
/// them before they are installed.
pub enum Change {
    /// Row `slot` is now these bytes (a table row, `table::Row`).
    Set(usize, std::sync::Arc<[u8]>),
    SwapRemove(usize),
}

impl Columns {
    /// What a count lacks, read from `rows` in one pass: the first four columns when
    /// `base`, and the column of each of `keys` (None for a key past the limits).
    fn build_one(
        rows: &[impl AsRef<[u8]>],
        base: bool,
        keys: &[String],
    ) -> Result<(Columns, Vec<Option<DataColumn>>)> {
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
                    if !col.set(col.codes.len(), v.take()) {
                        *slot = None;
                    }
                }
            }
        }
        Ok((c, cols))
    }

    /// The first four columns of `rows` when `base`, and a column for each of `keys`
    /// (at most `MAX_DATA_COLUMNS` of them), read in parts on up to `threads` threads
    /// and joined in order. A key past the limits is noted as unfit.
    pub fn build(
        rows: &[impl AsRef<[u8]> + Sync],
        base: bool,
        keys: &[String],
        threads: usize,
    ) -> Result<Columns> {
        let keys = &keys[..keys.len().min(MAX_DATA_COLUMNS)];
        let parts = in_parts(rows.len(), threads, 50_000, "a column build", |r| {
            Self::build_one(&rows[r], base, keys)
        })?;
        let mut joined: Option<(Columns, Vec<Option<DataColumn>>)> = None;
        for (b, cols) in parts {
            let Some((jb, jcols)) = &mut joined else {
                joined = Some((b, cols));
                continue;
            };
            jb.ids.extend(b.ids);
            jb.subscribed.extend(b.subscribed);
            jb.created_at.extend(b.created_at);
            jb.updated_at.extend(b.updated_at);
            for (slot, col) in jcols.iter_mut().zip(cols) {
                *slot = match (slot.take(), col) {
                    (Some(mut into), Some(from)) => into.append(from).then_some(into),
                    _ => None,
                };
            }
        }
        let (mut c, cols) = match joined {
            Some(j) => j,
            None => (Columns::default(), keys.iter().map(|_| None).collect()),
        };
        for (k, col) in keys.iter().zip(cols) {
            match col {
                Some(col) => c.data.insert(k.clone(), col),
                None => {
                    c.unfit.insert(k.clone());
                    None
                }
            };
        }
        Ok(c)
    }

    /// Whether `keys` can be counted from columns: none unfit, and room for those
    /// without one.
    pub fn can_hold(&self, keys: &[String]) -> bool {
        let missing = keys.iter().filter(|k| !self.data.contains_key(*k));
        let mut n = 0;
        for k in missing {
            if self.unfit.contains(k) {
                return false;
            }
            n += 1;
        }
        self.data.len() + n <= MAX_DATA_COLUMNS
    }

    /// Whether the first four columns hold `rows` rows (they always do: a table that
    /// keeps columns keeps them beside its rows).
    pub fn has_rows(&self, rows: usize) -> bool {
        self.subscribed.len() == rows
    }

    /// The keys of `keys` without a column.
    pub fn missing(&self, keys: &[String]) -> Vec<String> {
        keys.iter()
            .filter(|k| !self.data.contains_key(*k))
            .cloned()
            .collect()
    }

    /// A copy of what a count over `keys` reads, if every key has a column and every
    /// column has `rows` values.
    pub fn copy(&self, keys: &[String], needs: Needs, rows: usize) -> Option<ColumnView> {
        if !self.has_rows(rows) {
            return None;
        }
        let data = keys
            .iter()
            .map(|k| {
                self.data
                    .get(k)
                    .filter(|d| d.codes.len() == rows)
                    .map(DataColumn::for_count)
            })
            .collect::<Option<Vec<_>>>()?;
        fn copied<T: Clone>(needed: bool, column: &[T]) -> Vec<T> {
            match needed {
                true => column.to_vec(),
                false => Vec::new(),
            }
        }
        Some(ColumnView {
            ids: copied(needs.ids, &self.ids),
            subscribed: self.subscribed.clone(),
            created_at: copied(needs.times, &self.created_at),
            updated_at: copied(needs.times, &self.updated_at),
            data,
        })
    }

    /// Brings what `built` holds into these columns: its first four columns when it
    /// has them (then it replaces these whole), its `data` columns and unfit keys.
    pub fn install(columns: &mut Option<Columns>, built: Columns, base: bool) {
        match columns {
            Some(c) if !base => {
                for (k, col) in built.data {
                    if c.data.len() < MAX_DATA_COLUMNS {
                        c.data.entry(k).or_insert(col);
                    }
                }
                c.unfit.extend(built.unfit);
            }
            _ => *columns = Some(built),
        }
    }

    /// Applies `change`, a write made while these were built; `base`: to the first
    /// four columns too (else only to the `data` ones).
    pub fn replay(&mut self, change: &Change, base: bool) -> Result<()> {
        match change {
            Change::Set(slot, row) => self.set_parts(*slot, row, base),
            Change::SwapRemove(slot) => {
                self.swap_remove_parts(*slot, base);
                Ok(())
            }
        }
    }

    /// Row `slot` is now `row` (`slot` == the length: a new row at the end).
    pub fn set(&mut self, slot: usize, row: &[u8]) -> Result<()> {
        self.set_parts(slot, row, true)
    }

    fn set_parts(&mut self, slot: usize, row: &[u8], base: bool) -> Result<()> {
        let r = ContactRef::decode(row)?;
        if !self.data.is_empty() {
            // One pass over the row's JSON for every column's key.
            let keys: Vec<String> = self.data.keys().cloned().collect();
            let mut out = vec![None; keys.len()];
            pick(r.data, &keys, &mut out);
            for (key, v) in keys.into_iter().zip(out) {
                let fits = self.data.get_mut(&key).is_some_and(|col| col.set(slot, v));
                if !fits {
                    self.data.remove(&key);
                    self.unfit.insert(key);
                }
            }
        }
        if !base {
            return Ok(());
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
        self.swap_remove_parts(slot, true)
    }

    fn swap_remove_parts(&mut self, slot: usize, base: bool) {
        if base {
            self.ids.swap_remove(slot);
            self.subscribed.swap_remove(slot);
            self.created_at.swap_remove(slot);
            self.updated_at.swap_remove(slot);
        }
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
    use std::sync::Arc;

    fn row(i: usize, plan: &str) -> Vec<u8> {
        let mut data = DataMap::new();
        data.insert("plan".into(), json!(plan));
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
    }

    const ALL: Needs = Needs {
        ids: true,
        times: true,
    };

    /// Two sets of columns hold the same: flags, ids, times and every value.
    fn same(a: &Columns, b: &Columns, keys: &[String], rows: usize) {
        let (a, b) = (
            a.copy(keys, ALL, rows).unwrap(),
            b.copy(keys, ALL, rows).unwrap(),
        );
        assert_eq!(a.ids, b.ids);
        assert_eq!(a.subscribed, b.subscribed);
        assert_eq!(
            (&a.created_at, &a.updated_at),
            (&b.created_at, &b.updated_at)
        );
        for (x, y) in a.data.iter().zip(&b.data) {
            assert!((0..rows).all(|i| x.value(i) == y.value(i)));
        }
    }

    #[test]
    fn columns_built_in_parts_read_as_those_built_in_one_pass() {
        let rows: Vec<Vec<u8>> = (0..60_000usize)
            .map(|i| row(i, &format!("p{}", (i * 7919) % 97)))
            .collect();
        let keys = ["plan".to_owned(), "seen".to_owned(), "id".to_owned()];
        let one = Columns::build(&rows, true, &keys, 1).unwrap();
        let parts = Columns::build(&rows, true, &keys, 3).unwrap();
        same(&one, &parts, &keys[..2], rows.len());
        assert!(
            !one.can_hold(&keys[2..]) && !parts.can_hold(&keys[2..]),
            "a key of a value per row has no column either way"
        );
    }

    #[test]
    fn writes_replayed_onto_columns_built_from_an_earlier_copy_match_a_fresh_build() {
        let keys = ["plan".to_owned(), "seen".to_owned()];
        let mut rows: Vec<Arc<[u8]>> = (0..500).map(|i| Arc::from(row(i, "free"))).collect();
        let mut built = Columns::build(&rows, true, &keys, 1).unwrap();
        // The writes of the build's time: rewrites, removals, new rows.
        let mut log = Vec::new();
        for i in (0..500).step_by(7) {
            let r: Arc<[u8]> = Arc::from(row(i, "pro"));
            rows[i] = r.clone();
            log.push(Change::Set(i, r));
        }
        for slot in [3, 250, 100] {
            rows.swap_remove(slot);
            log.push(Change::SwapRemove(slot));
        }
        for i in 500..520 {
            let r: Arc<[u8]> = Arc::from(row(i, "team"));
            log.push(Change::Set(rows.len(), r.clone()));
            rows.push(r);
        }
        for change in &log {
            built.replay(change, true).unwrap();
        }
        let fresh = Columns::build(&rows, true, &keys, 1).unwrap();
        same(&built, &fresh, &keys, rows.len());
    }

    #[test]
    fn a_key_of_few_but_large_values_gets_no_column() {
        let mut col = DataColumn::new();
        let big = |i: usize| Some(json!(format!("{i}{}", "x".repeat(40_000))));
        let codes: Vec<Option<u32>> = (0..30).map(|i| col.code(big(i))).collect();
        assert!(
            codes[..5].iter().all(Option::is_some),
            "the first values fit"
        );
        assert_eq!(
            codes[29], None,
            "30 values of 40 kB pass MAX_DISTINCT_BYTES"
        );
        // An array's values take more memory than its text says.
        let mut col = DataColumn::new();
        let zeros = |i: usize| Some(json!(vec![i; 8_000]));
        assert!(
            (0..40).any(|i| col.code(zeros(i)).is_none()),
            "arrays are counted whole"
        );
    }
}
