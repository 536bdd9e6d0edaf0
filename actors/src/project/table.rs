//! A project's contacts held in memory, in their stored (bincode) form, beside the store.
//!
//! The project actor writes it right after each contact batch, so it always agrees with
//! the store. It serves the two things a store lookup makes slow: the write path's
//! "who has this email?" (one hash lookup instead of two store reads), and exact
//! segment counts, which evaluate every contact (a walk over memory instead of a store
//! scan). Rows are shared (`Arc`), so a count copies the row pointers under a short read
//! lock and evaluates without holding it: a long count never stalls the actor's writes.
//!
//! Memory is about 250 bytes a contact (a million contacts: ~250 MB).

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::Result;
use crate::model::{Contact, ContactId, ContactRef, ProjectId};
use crate::store::{keys, Store};

pub type Row = Arc<[u8]>;

#[derive(Default)]
pub struct ContactTable {
    inner: RwLock<Rows>,
}

#[derive(Default)]
struct Rows {
    loaded: bool,
    rows: Vec<Row>,
    /// Where each contact's row is in `rows`.
    by_id: HashMap<ContactId, usize>,
    by_email: HashMap<Box<str>, ContactId>,
}

impl Rows {
    fn insert(&mut self, id: ContactId, email: &str, row: Row) {
        match self.by_id.get(&id) {
            Some(&i) => self.rows[i] = row,
            None => {
                self.by_id.insert(id, self.rows.len());
                self.rows.push(row);
                self.by_email.insert(email.into(), id);
            }
        }
    }

    fn remove(&mut self, id: ContactId, email: &str) {
        let Some(i) = self.by_id.remove(&id) else {
            return;
        };
        self.by_email.remove(email);
        self.rows.swap_remove(i);
        // The last row moved into the hole: point its id at the new place.
        if let Some(moved) = self.rows.get(i) {
            if let Ok(c) = ContactRef::decode(moved) {
                self.by_id.insert(c.id, i);
            }
        }
    }
}

impl ContactTable {
    fn read(&self) -> RwLockReadGuard<'_, Rows> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Rows> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
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
        *rows = Rows::default();
        Self::fill(&mut rows, store, p)
    }

    fn fill(rows: &mut Rows, store: &dyn Store, p: ProjectId) -> Result<()> {
        let started = std::time::Instant::now();
        for kv in store.scan(&keys::contacts(p), None, false) {
            let (_, v) = kv?;
            let c = ContactRef::decode(&v)?;
            let (id, email) = (c.id, c.email.to_owned());
            rows.insert(id, &email, Arc::from(v));
        }
        rows.loaded = true;
        if rows.rows.len() >= 10_000 {
            tracing::info!(
                project = %p,
                contacts = rows.rows.len(),
                millis = started.elapsed().as_millis() as u64,
                "loaded the project's contacts into memory"
            );
        }
        Ok(())
    }

    pub fn id_by_email(&self, email: &str) -> Option<ContactId> {
        self.read().by_email.get(email).copied()
    }

    pub fn get(&self, id: ContactId) -> Result<Option<Contact>> {
        let row = {
            let rows = self.read();
            rows.by_id.get(&id).map(|&i| rows.rows[i].clone())
        };
        row.map(|r| Contact::decode(&r)).transpose()
    }

    pub fn by_email(&self, email: &str) -> Result<Option<Contact>> {
        let row = {
            let rows = self.read();
            rows.by_email
                .get(email)
                .and_then(|id| rows.by_id.get(id))
                .map(|&i| rows.rows[i].clone())
        };
        row.map(|r| Contact::decode(&r)).transpose()
    }

    /// Records a contact as written (its stored bytes).
    pub fn put(&self, contact: &Contact, stored: &[u8]) {
        self.write()
            .insert(contact.id, contact.email.as_str(), Arc::from(stored));
    }

    pub fn remove(&self, contact: &Contact) {
        self.write().remove(contact.id, contact.email.as_str());
    }

    /// Every row at this moment, for a count that runs without the lock.
    pub fn rows(&self) -> Vec<Row> {
        self.read().rows.clone()
    }

    pub fn len(&self) -> usize {
        self.read().rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
}
