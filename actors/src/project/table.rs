//! A project's contacts held in memory, in their stored (bincode) form, beside the store.
//!
//! The project actor writes it right after each contact batch, so it always agrees with
//! the store. It serves the two things a store lookup makes slow: the write path's
//! "who has this email?" (one hash lookup instead of two store reads), and exact
//! segment counts, which evaluate every contact (a walk over memory instead of a store
//! scan). Rows are shared (`Arc`), so a count copies the row pointers under a short read
//! lock and evaluates without holding it: a long count never stalls the actor's writes.
//!
//! Footprint: a row is its stored bytes behind an `Arc` (16 bytes of counts), one
//! 16-byte pointer in `rows`, and a 4-byte slot number in each of two hash indexes (plus
//! a control byte each, at most 7/8 full). The indexes hold no keys of their own: the id
//! and the email are read back from the row when a lookup compares, so an email is kept
//! once, in its row. About 40 bytes a contact beyond the row's bytes and its `Arc`; the
//! row is the id, the email, the data as JSON text and two timestamps. Measured: 149
//! bytes a contact in all at 1M with small data (docs/performance.md, 2026-11-25).
//!
//! Once a project is counted, the table also keeps columns beside the rows
//! (`table_columns`): what a count copies, in contiguous arrays, instead of every row.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::{DefaultHashBuilder, HashTable};

use super::table_columns::{Change, ColumnView, Columns, Needs, MAX_DATA_COLUMNS};
use crate::error::Result;
use crate::model::{Contact, ContactId, ProjectId};
use crate::store::{keys, Store};

pub type Row = Arc<[u8]>;

#[derive(Default)]
pub struct ContactTable {
    inner: RwLock<Rows>,
    /// Held by the one count that builds columns (`with_columns`).
    building: Mutex<()>,
}

/// Writes logged while columns are built before the build is abandoned.
const MAX_BUILD_LOG: usize = 100_000;

/// The fields an index compares: the first two of the stored form (see `Stored` in
/// model/contact.rs), decoded without reading the rest.
#[derive(serde::Deserialize)]
struct Head<'a> {
    id: ContactId,
    email: &'a str,
}

fn head(row: &[u8]) -> Option<Head<'_>> {
    crate::store::codec::decode_borrowed(row).ok()
}

#[derive(Default)]
struct Rows {
    loaded: bool,
    rows: Vec<Row>,
    /// Slots in `rows`, found by the hash of the row's id.
    by_id: HashTable<u32>,
    /// Slots in `rows`, found by the hash of the row's email.
    by_email: HashTable<u32>,
    /// Seeded at random per table, so nobody can choose emails that collide.
    hasher: DefaultHashBuilder,
    /// What counts read instead of the rows (`table_columns`), once a count built them.
    columns: Option<Columns>,
    /// Moves at every load and reload: columns built from a copy of other rows are
    /// never installed.
    epoch: u64,
    /// While columns are built from a copy of the rows, the writes since the copy, to
    /// replay onto them (None: no build, or one abandoned past `MAX_BUILD_LOG`).
    build_log: Option<Vec<Change>>,
}

impl Rows {
    fn id_hash(&self, id: ContactId) -> u64 {
        self.hasher.hash_one(id.as_bytes())
    }

    fn email_hash(&self, email: &str) -> u64 {
        self.hasher.hash_one(email)
    }

    fn slot_of_id(&self, id: ContactId) -> Option<usize> {
        let rows = &self.rows;
        self.by_id
            .find(self.id_hash(id), |&s| {
                head(&rows[s as usize]).is_some_and(|h| h.id == id)
            })
            .map(|&s| s as usize)
    }

    fn slot_of_email(&self, email: &str) -> Option<usize> {
        let rows = &self.rows;
        self.by_email
            .find(self.email_hash(email), |&s| {
                head(&rows[s as usize]).is_some_and(|h| h.email == email)
            })
            .map(|&s| s as usize)
    }

    /// Points the index entry at `from` for `hash` to `to` instead.
    fn repoint(table: &mut HashTable<u32>, hash: u64, from: usize, to: usize) {
        if let Some(s) = table.find_mut(hash, |&s| s as usize == from) {
            *s = to as u32;
        }
    }

    fn unindex(table: &mut HashTable<u32>, hash: u64, slot: usize) {
        if let Ok(e) = table.find_entry(hash, |&s| s as usize == slot) {
            e.remove();
        }
    }

    fn insert(&mut self, id: ContactId, email: &str, row: Row) {
        let existing = self.slot_of_id(id);
        if self.columns.is_some() || self.build_log.is_some() {
            let slot = existing.unwrap_or(self.rows.len());
            self.log(Change::Set(slot, row.clone()));
            if let Some(c) = &mut self.columns {
                if c.set(slot, &row).is_err() {
                    // A row that does not decode: counts read the rows again.
                    self.columns = None;
                }
            }
        }
        if let Some(s) = existing {
            let old = std::mem::replace(&mut self.rows[s], row);
            match head(&old) {
                Some(h) if h.email == email => {}
                h => {
                    if let Some(h) = h {
                        let hash = self.email_hash(h.email);
                        Self::unindex(&mut self.by_email, hash, s);
                    }
                    self.index_email(email, s);
                }
            }
            return;
        }
        let s = self.rows.len();
        self.rows.push(row);
        let (rows, hasher) = (&self.rows, &self.hasher);
        self.by_id
            .insert_unique(self.hasher.hash_one(id.as_bytes()), s as u32, |&x| {
                head(&rows[x as usize]).map_or(0, |h| hasher.hash_one(h.id.as_bytes()))
            });
        self.index_email(email, s);
    }

    /// Points `email` at slot `s`. An email names one contact: an entry that still
    /// points it elsewhere goes first.
    fn index_email(&mut self, email: &str, s: usize) {
        let (rows, hasher) = (&self.rows, &self.hasher);
        let hash = hasher.hash_one(email);
        let stale =
            |&x: &u32| x as usize != s && head(&rows[x as usize]).is_some_and(|h| h.email == email);
        if let Ok(e) = self.by_email.find_entry(hash, stale) {
            e.remove();
        }
        self.by_email.insert_unique(hash, s as u32, |&x| {
            head(&rows[x as usize]).map_or(0, |h| hasher.hash_one(h.email))
        });
    }

    fn remove(&mut self, id: ContactId) {
        let Some(s) = self.slot_of_id(id) else {
            return;
        };
        let hash = self.id_hash(id);
        Self::unindex(&mut self.by_id, hash, s);
        if let Some(h) = head(&self.rows[s]) {
            let hash = self.email_hash(h.email);
            Self::unindex(&mut self.by_email, hash, s);
        }
        let last = self.rows.len() - 1;
        self.rows.swap_remove(s);
        self.log(Change::SwapRemove(s));
        if let Some(c) = &mut self.columns {
            c.swap_remove(s);
        }
        if s == last {
            return;
        }
        // The last row moved into the hole: point its index entries at the new place.
        let Some((id_hash, email_hash)) =
            head(&self.rows[s]).map(|h| (self.id_hash(h.id), self.email_hash(h.email)))
        else {
            return;
        };
        Self::repoint(&mut self.by_id, id_hash, last, s);
        Self::repoint(&mut self.by_email, email_hash, last, s);
    }

    /// Notes a write for the columns being built, if any; past `MAX_BUILD_LOG` writes
    /// the build is abandoned (its count reads the rows; a later one builds again).
    fn log(&mut self, change: Change) {
        if let Some(log) = &mut self.build_log {
            match log.len() < MAX_BUILD_LOG {
                true => log.push(change),
                false => self.build_log = None,
            }
        }
    }

    /// Builds both indexes over `rows` (a load), one on each of two threads: they only
    /// read the rows. The store holds one contact per id and per email; should two rows
    /// share an email anyway, the later one has it, as a put would leave it.
    fn index_all(&mut self) -> Result<()> {
        let (rows, hasher) = (&self.rows, &self.hasher);
        let build = |key: &(dyn Fn(&Head) -> u64 + Sync), unique: bool| {
            let mut t = HashTable::with_capacity(rows.len());
            let rehash = |&x: &u32| head(&rows[x as usize]).map_or(0, |h| key(&h));
            for (s, row) in rows.iter().enumerate() {
                let Some(h) = head(row) else {
                    return Err(crate::error::Error::storage(
                        "a stored contact that does not decode",
                    ));
                };
                let hash = key(&h);
                if !unique {
                    let same =
                        |&x: &u32| head(&rows[x as usize]).is_some_and(|o| o.email == h.email);
                    if let Ok(e) = t.find_entry(hash, same) {
                        e.remove();
                    }
                }
                t.insert_unique(hash, s as u32, rehash);
            }
            Ok(t)
        };
        let by_id = |h: &Head| hasher.hash_one(h.id.as_bytes());
        let by_email = |h: &Head| hasher.hash_one(h.email);
        let (ids, emails) = std::thread::scope(|s| {
            let ids = s.spawn(|| build(&by_id, true));
            let emails = build(&by_email, false);
            (ids.join(), emails)
        });
        self.by_id =
            ids.map_err(|_| crate::error::Error::Internal("indexing panicked".into()))??;
        self.by_email = emails?;
        Ok(())
    }

    /// Heap bytes the table holds: what the operator's log line reports.
    fn heap_bytes(&self) -> usize {
        // An Arc<[u8]> is its two counts and the bytes, in jemalloc's 16-byte classes.
        let rows: usize = self
            .rows
            .iter()
            .map(|r| (16 + r.len()).div_ceil(16) * 16)
            .sum();
        rows + self.rows.capacity() * std::mem::size_of::<Row>()
            + self.by_id.allocation_size()
            + self.by_email.allocation_size()
            + self.columns.as_ref().map_or(0, Columns::heap_bytes)
    }
}

impl ContactTable {
    fn read(&self) -> RwLockReadGuard<'_, Rows> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Rows> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the table holds the project's contacts (it starts empty).
    pub fn is_loaded(&self) -> bool {
        self.read().loaded
    }

    /// Fills the table from the store unless it is loaded already. Whoever needs the
    /// table first (the actor starting, or a count) pays for the load; the others wait.
    pub fn ensure_loaded(&self, store: &dyn Store, p: ProjectId) -> Result<()> {
        if self.read().loaded {
            return Ok(());
        }
        let mut rows = self.write();
        if rows.loaded {
            return Ok(());
        }
        Self::fill(&mut rows, store, p)
    }

    /// Forgets everything and reads the project's contacts again from the store (an
    /// actor restart promises a reload from the store).
    pub fn reload(&self, store: &dyn Store, p: ProjectId) -> Result<()> {
        let mut rows = self.write();
        // The epoch goes on: columns built from a copy taken before the reload must
        // not be installed over the reloaded rows.
        let epoch = rows.epoch;
        *rows = Rows::default();
        rows.epoch = epoch;
        Self::fill(&mut rows, store, p)
    }

    fn fill(rows: &mut Rows, store: &dyn Store, p: ProjectId) -> Result<()> {
        // Columns of the rows before are no columns of these.
        rows.columns = None;
        rows.build_log = None;
        rows.epoch += 1;
        let started = std::time::Instant::now();
        let threads = crate::parts::cores().min(4);
        rows.rows = super::table_load::read(store, &keys::contacts(p), threads)?;
        let read = started.elapsed();
        rows.index_all()?;
        rows.loaded = true;
        if rows.rows.len() >= 10_000 {
            tracing::info!(
                project = %p,
                contacts = rows.rows.len(),
                millis = started.elapsed().as_millis() as u64,
                read_millis = read.as_millis() as u64,
                threads,
                table_bytes = rows.heap_bytes() as u64,
                "loaded the project's contacts into memory"
            );
        }
        Ok(())
    }

    pub fn id_by_email(&self, email: &str) -> Option<ContactId> {
        let rows = self.read();
        let s = rows.slot_of_email(email)?;
        head(&rows.rows[s]).map(|h| h.id)
    }

    pub fn get(&self, id: ContactId) -> Result<Option<Contact>> {
        let row = {
            let rows = self.read();
            rows.slot_of_id(id).map(|s| rows.rows[s].clone())
        };
        row.map(|r| Contact::decode(&r)).transpose()
    }

    pub fn by_email(&self, email: &str) -> Result<Option<Contact>> {
        let row = {
            let rows = self.read();
            rows.slot_of_email(email).map(|s| rows.rows[s].clone())
        };
        row.map(|r| Contact::decode(&r)).transpose()
    }

    /// Records a contact as written (its stored bytes).
    pub fn put(&self, contact: &Contact, stored: &[u8]) {
        self.write()
            .insert(contact.id, contact.email.as_str(), Arc::from(stored));
    }

    pub fn remove(&self, contact: &Contact) {
        self.write().remove(contact.id);
    }

    /// Every row at this moment, for a count that runs without the lock.
    pub fn rows(&self) -> Vec<Row> {
        self.read().rows.clone()
    }

    /// Runs `f` over a copy of the table's columns (`table_columns`) with the `data`
    /// columns of `keys` (and the ids and times when `needs` says), made under the
    /// read lock (a memory copy: milliseconds at a million contacts, which is all the
    /// actor's writes wait), so that `f` walks it with no lock held. What is missing is
    /// built first, once at a time per table, from a copy of the rows and outside the
    /// lock; the writes that land meanwhile are replayed onto it before it is kept.
    /// None when a key can have no column or another count is building: the caller
    /// then reads the rows.
    pub fn with_columns<R>(
        &self,
        keys: &[String],
        needs: Needs,
        f: impl FnOnce(&ColumnView) -> R,
    ) -> Result<Option<R>> {
        if keys.len() > MAX_DATA_COLUMNS {
            return Ok(None);
        }
        for attempt in 0..2 {
            {
                let rows = self.read();
                if let Some(c) = &rows.columns {
                    if let Some(view) = c.copy(keys, needs, rows.rows.len()) {
                        drop(rows);
                        return Ok(Some(f(&view)));
                    }
                    if !c.can_hold(keys) {
                        return Ok(None);
                    }
                }
            }
            if attempt == 1 || !self.build(keys)? {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// Builds the columns `keys` lack; whether they were kept (not when another build
    /// runs, a reload came, or too many writes did).
    fn build(&self, keys: &[String]) -> Result<bool> {
        let Ok(_only) = self.building.try_lock() else {
            return Ok(false);
        };
        let (copy, epoch, base, missing) = {
            let mut rows = self.write();
            let (base, missing) = match &rows.columns {
                // Columns that disagree with the rows (never seen) are built again.
                Some(c) if c.has_rows(rows.rows.len()) => (false, c.missing(keys)),
                _ => (true, keys.to_vec()),
            };
            rows.build_log = Some(Vec::new());
            (rows.rows.clone(), rows.epoch, base, missing)
        };
        let started = std::time::Instant::now();
        let built = Columns::build(&copy, base, &missing, crate::parts::cores());
        drop(copy);
        let mut rows = self.write();
        let log = rows.build_log.take();
        let mut built = built?;
        let Some(log) = log.filter(|_| rows.epoch == epoch) else {
            return Ok(false);
        };
        for change in &log {
            built.replay(change, base)?;
        }
        Columns::install(&mut rows.columns, built, base);
        if rows.rows.len() >= 10_000 {
            tracing::info!(
                contacts = rows.rows.len(),
                keys = ?missing,
                millis = started.elapsed().as_millis() as u64,
                writes_replayed = log.len(),
                column_bytes = rows.columns.as_ref().map_or(0, Columns::heap_bytes) as u64,
                "built the contact table's columns for counts"
            );
        }
        Ok(true)
    }

    pub fn len(&self) -> usize {
        self.read().rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes the table holds now.
    pub fn heap_bytes(&self) -> usize {
        self.read().heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DataMap, EmailAddress};

    fn contact(email: &str) -> Contact {
        Contact {
            id: ContactId::new(),
            email: EmailAddress::parse(email).unwrap(),
            subscribed: true,
            data: DataMap::new(),
            created_at: 1.into(),
            updated_at: 1.into(),
        }
    }

    #[test]
    fn removing_a_row_keeps_the_moved_last_row_reachable() {
        let t = ContactTable::default();
        let (a, b, c) = (
            contact("a@example.com"),
            contact("b@example.com"),
            contact("c@example.com"),
        );
        for x in [&a, &b, &c] {
            t.put(x, &x.encode().unwrap());
        }
        t.remove(&a);
        assert_eq!(t.len(), 2);
        assert_eq!(t.by_email("a@example.com").unwrap(), None);
        assert_eq!(t.get(c.id).unwrap().unwrap().email, c.email);
        assert_eq!(t.by_email("c@example.com").unwrap().unwrap().id, c.id);
        assert_eq!(t.by_email("b@example.com").unwrap().unwrap().id, b.id);
    }

    #[test]
    fn putting_a_contact_again_replaces_its_row() {
        let t = ContactTable::default();
        let mut a = contact("a@example.com");
        t.put(&a, &a.encode().unwrap());
        a.subscribed = false;
        t.put(&a, &a.encode().unwrap());
        assert_eq!(t.len(), 1);
        assert!(!t.get(a.id).unwrap().unwrap().subscribed);
    }

    #[test]
    fn a_contact_put_with_another_email_is_found_by_the_new_one_only() {
        let t = ContactTable::default();
        let mut a = contact("old@example.com");
        t.put(&a, &a.encode().unwrap());
        a.email = EmailAddress::parse("new@example.com").unwrap();
        t.put(&a, &a.encode().unwrap());
        assert_eq!(t.id_by_email("old@example.com"), None);
        assert_eq!(t.id_by_email("new@example.com"), Some(a.id));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn thousands_of_puts_and_removes_agree_with_a_plain_map() {
        let t = ContactTable::default();
        let mut model = std::collections::HashMap::new();
        let people: Vec<Contact> = (0..3_000)
            .map(|i| contact(&format!("p{i}@example.com")))
            .collect();
        for (i, c) in people.iter().enumerate() {
            t.put(c, &c.encode().unwrap());
            model.insert(c.email.as_str().to_owned(), c.id);
            // Every third contact goes again, from all over the table.
            if i % 3 == 2 {
                let gone = &people[(i * 7) % (i + 1)];
                t.remove(gone);
                model.remove(gone.email.as_str());
            }
        }
        assert_eq!(t.len(), model.len());
        for c in &people {
            let want = model.get(c.email.as_str()).copied();
            assert_eq!(
                t.id_by_email(c.email.as_str()),
                want,
                "{}",
                c.email.as_str()
            );
            assert_eq!(t.get(c.id).unwrap().map(|x| x.id), want);
        }
        assert_eq!(t.rows().len(), model.len());
    }

    #[tokio::test]
    async fn a_load_from_the_store_finds_every_contact_by_id_and_by_email() {
        use crate::store::{Batch, SledConfig, SledStore};
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), SledConfig::default()).unwrap();
        let p = ProjectId::new();
        let people: Vec<Contact> = (0..2_000)
            .map(|i| contact(&format!("p{i}@example.com")))
            .collect();
        let mut b = Batch::new();
        for c in &people {
            b.put(keys::contact(p, c.id), c.encode().unwrap());
        }
        store.apply(b).unwrap();
        store.durable().await.unwrap();
        let t = ContactTable::default();
        // Columns asked of the table before its load are not the loaded rows' columns.
        assert_eq!(
            t.with_columns(&[], Needs::default(), |v| v.len()).unwrap(),
            Some(0)
        );
        t.ensure_loaded(&*store, p).unwrap();
        assert_eq!(t.len(), people.len());
        for c in &people {
            assert_eq!(t.id_by_email(c.email.as_str()), Some(c.id));
            assert_eq!(t.get(c.id).unwrap().map(|x| x.email), Some(c.email.clone()));
        }
        t.remove(&people[0]);
        assert_eq!(t.id_by_email(people[0].email.as_str()), None);
        assert_eq!(
            t.with_columns(&[], Needs::default(), |v| v.len()).unwrap(),
            Some(people.len() - 1),
            "columns of every row"
        );
        t.reload(&*store, p).unwrap();
        assert_eq!(
            t.with_columns(&[], Needs::default(), |v| v.len()).unwrap(),
            Some(people.len()),
            "after a reload, columns of the reloaded rows"
        );
        assert_eq!(
            t.id_by_email(people[1_999].email.as_str()),
            Some(people[1_999].id)
        );
    }
}
