//! Projects and their keys: create, list, disable, enable, rotate, and the lookup that
//! authenticates a request. Used by the CLI (server stopped) and the admin API.
//! Writes are applied here; the caller makes them durable (`Store::durable` or
//! `Store::flush_blocking`) before it reports success.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::error::{Error, FieldCode, Resource, Result};
use crate::model::{ApiKey, KeyKind, Project, ProjectId, Timestamp};
use crate::store::{codec, keys, Batch, Store};

pub const MAX_NAME_LEN: usize = 100;

/// A project with the only copy of its keys in clear text.
#[derive(Debug, Clone)]
pub struct IssuedKeys {
    pub project: Project,
    pub secret_key: ApiKey,
    pub public_key: ApiKey,
}

/// What a presented key resolves to.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub project: Project,
    pub kind: KeyKind,
}

#[derive(Clone)]
pub struct Projects {
    store: Arc<dyn Store>,
    known: Arc<RwLock<KnownKeys>>,
    /// Held across each read-modify-write of a project: two rotations that both read
    /// the old hashes would otherwise each delete only those, and the first rotation's
    /// new keys would survive beside the second's.
    writes: Arc<Mutex<()>>,
    /// The last count of projects and when it was taken (`recent_count`).
    counted: Arc<Mutex<Option<(Instant, usize)>>>,
}

/// Keys seen lately, so that a request costs one hash lookup instead of two store reads
/// and a decode. An entry must never outlive the records it was read from: every write
/// here clears the map, and so does every re-read of the records that another process
/// wrote (a cluster node re-reads `projects/` and `keys/` each tick and then calls
/// `forget_cached_keys`), so a key rotated or a project disabled anywhere is refused here
/// as soon as this process can see the change. `generation` keeps a lookup that raced a
/// write or a re-read from caching what it read.
#[derive(Default)]
struct KnownKeys {
    by_hash: HashMap<[u8; 32], Authenticated>,
    generation: u64,
}

/// Past this many keys the map starts over (a bound, not an eviction policy: real
/// deployments have far fewer keys than this).
const KNOWN_KEYS_MAX: usize = 10_000;

impl Projects {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Projects {
            store,
            known: Arc::default(),
            writes: Arc::default(),
            counted: Arc::default(),
        }
    }

    /// Empties the cache of keys: the records behind it were read again (they may have
    /// been changed by another node or the CLI).
    /// Reads `key` (an API key's record or a project's) from the database into this
    /// node's view, and the project an API key points to: one made a moment ago on
    /// another node or by the CLI. Blocking (a round trip to the database).
    pub fn read_through(&self, missing: Missing) -> Result<()> {
        let key = &missing.key()[..];
        self.store.reload_prefix(key)?;
        if !key.starts_with(keys::API_KEYS) {
            return Ok(());
        }
        match self.store.get(key)?.as_deref().and_then(key_owner) {
            Some(id) => self.store.reload_prefix(&keys::project(id)),
            None => Ok(()),
        }
    }

    /// Re-reads every project and API key that other nodes or the CLI wrote, then
    /// forgets the keys cached from the old copies: a rotated key, a disabled or a
    /// deleted project is refused from then on. Blocking.
    pub fn reload(&self) -> Result<()> {
        for prefix in [keys::PROJECTS, keys::API_KEYS] {
            self.store.reload_prefix(prefix)?;
        }
        self.forget_cached_keys();
        Ok(())
    }

    pub fn forget_cached_keys(&self) {
        let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
        known.by_hash.clear();
        known.generation += 1;
    }

    pub(crate) fn create(&self, name: &str, now: Timestamp) -> Result<IssuedKeys> {
        let _writing = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
            return Err(Error::field(
                "name",
                if name.is_empty() {
                    FieldCode::TooSmall
                } else {
                    FieldCode::TooBig
                },
                format!("name must be 1 to {MAX_NAME_LEN} characters"),
            ));
        }
        let (secret_key, public_key) = (
            ApiKey::generate(KeyKind::Secret),
            ApiKey::generate(KeyKind::Public),
        );
        let project = Project {
            id: ProjectId::new(),
            name: name.to_owned(),
            disabled: false,
            secret_key_hash: secret_key.hash(),
            public_key_hash: public_key.hash(),
            created_at: now.millis(),
        };
        let mut batch = Batch::new();
        self.put(&mut batch, &project)?;
        batch.put(
            keys::key_hash(&project.secret_key_hash),
            project.id.to_string().into_bytes(),
        );
        batch.put(
            keys::key_hash(&project.public_key_hash),
            project.id.to_string().into_bytes(),
        );
        self.store.apply(batch)?;
        *self.counted.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(IssuedKeys {
            project,
            secret_key,
            public_key,
        })
    }

    /// How many projects there are, counted by their keys (no record decoded).
    pub fn count(&self) -> Result<usize> {
        let mut n = 0;
        for kv in self.store.scan(keys::PROJECTS, None, false) {
            kv?;
            n += 1;
        }
        *self.counted.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), n));
        Ok(n)
    }

    /// The last `count` when it is younger than `fresh` (None: count again). `/health`
    /// is called by every load balancer, often: a scan of every project on each call
    /// took a third off its rate.
    pub fn recent_count(&self, fresh: Duration) -> Option<usize> {
        let counted = *self.counted.lock().unwrap_or_else(|p| p.into_inner());
        counted
            .filter(|(at, _)| at.elapsed() < fresh)
            .map(|(_, n)| n)
    }

    pub fn list(&self) -> Result<Vec<Project>> {
        self.store
            .scan(keys::PROJECTS, None, false)
            .map(|kv| codec::decode(&kv?.1))
            .collect()
    }

    pub fn get(&self, id: ProjectId) -> Result<Project> {
        match self.store.get(&keys::project(id))? {
            Some(b) => codec::decode(&b),
            None => Err(Error::NotFound(Resource::Project)),
        }
    }

    pub(crate) fn set_disabled(&self, id: ProjectId, disabled: bool) -> Result<Project> {
        let _writing = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let mut project = self.get(id)?;
        project.disabled = disabled;
        let mut batch = Batch::new();
        self.put(&mut batch, &project)?;
        self.store.apply(batch)?;
        self.forget_cached_keys();
        Ok(project)
    }

    /// Issues new keys; the old ones stop working at once, and so do the click and open
    /// links of mail sent before (the project's link generation advances).
    pub(crate) fn rotate_keys(&self, id: ProjectId, now: Timestamp) -> Result<IssuedKeys> {
        let _writing = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let mut project = self.get(id)?;
        let (secret_key, public_key) = (
            ApiKey::generate(KeyKind::Secret),
            ApiKey::generate(KeyKind::Public),
        );
        let mut batch = Batch::new();
        batch.delete(keys::key_hash(&project.secret_key_hash));
        batch.delete(keys::key_hash(&project.public_key_hash));
        project.secret_key_hash = secret_key.hash();
        project.public_key_hash = public_key.hash();
        batch.put(
            keys::key_hash(&project.secret_key_hash),
            project.id.to_string().into_bytes(),
        );
        batch.put(
            keys::key_hash(&project.public_key_hash),
            project.id.to_string().into_bytes(),
        );
        self.put(&mut batch, &project)?;
        crate::link_generation::advance(&*self.store, &mut batch, id, now)?;
        self.store.apply(batch)?;
        self.forget_cached_keys();
        Ok(IssuedKeys {
            project,
            secret_key,
            public_key,
        })
    }

    /// The project a key belongs to, or None for an unknown key.
    pub fn authenticate(&self, key: &ApiKey) -> Result<Option<Authenticated>> {
        let hash = key.hash();
        let generation = {
            let known = self.known.read().unwrap_or_else(|p| p.into_inner());
            if let Some(auth) = known.by_hash.get(&hash) {
                return Ok(Some(auth.clone()));
            }
            known.generation
        };
        let found = self.lookup(&hash, key.kind())?;
        if let Some(auth) = &found {
            let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
            if known.generation == generation {
                if known.by_hash.len() >= KNOWN_KEYS_MAX {
                    known.by_hash.clear();
                }
                known.by_hash.insert(hash, auth.clone());
            }
        }
        Ok(found)
    }

    fn lookup(&self, hash: &[u8; 32], kind: KeyKind) -> Result<Option<Authenticated>> {
        let Some(id) = self.store.get(&keys::key_hash(hash))? else {
            return Ok(None);
        };
        let id = key_owner(&id).ok_or_else(|| Error::storage("bad key index entry"))?;
        let project = self.get(id)?;
        Ok(Some(Authenticated { project, kind }))
    }

    fn put(&self, batch: &mut Batch, project: &Project) -> Result<()> {
        batch.put(keys::project(project.id), codec::encode(project)?);
        Ok(())
    }
}

/// The project an API key's index entry (`keys::key_hash`) names.
fn key_owner(entry: &[u8]) -> Option<ProjectId> {
    std::str::from_utf8(entry).ok()?.parse().ok()
}

/// What a node reads through from the database when its view lacks it: a project's
/// record, or an API key's (by the key's hash) with the project it points to.
#[derive(Debug, Clone, Copy)]
pub enum Missing {
    Project(ProjectId),
    ApiKey([u8; 32]),
}

impl Missing {
    pub(crate) fn key(&self) -> Vec<u8> {
        match self {
            Missing::Project(id) => keys::project(*id),
            Missing::ApiKey(hash) => keys::key_hash(hash),
        }
    }
}

/// Whether an operator disabled the project: its mail, campaigns and workflows then
/// wait, untouched, until it is enabled again. (A project without a record, as in unit
/// tests of the engine, is not disabled.)
pub fn is_disabled(store: &dyn crate::store::Store, id: ProjectId) -> bool {
    match store.get(&keys::project(id)) {
        Ok(Some(b)) => codec::decode::<Project>(&b).is_ok_and(|p| p.disabled),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledStore;

    #[test]
    fn rotated_keys_replace_the_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let projects = Projects::new(SledStore::open(dir.path(), 8 << 20).unwrap());
        let issued = projects.create("Acme", Timestamp::from(0)).unwrap();
        assert!(projects.authenticate(&issued.secret_key).unwrap().is_some());
        let rotated = projects
            .rotate_keys(issued.project.id, Timestamp::from(0))
            .unwrap();
        assert!(projects.authenticate(&issued.secret_key).unwrap().is_none());
        assert!(projects.authenticate(&issued.public_key).unwrap().is_none());
        let auth = projects.authenticate(&rotated.public_key).unwrap().unwrap();
        assert_eq!(auth.kind, KeyKind::Public);
        assert_eq!(projects.list().unwrap().len(), 1);
    }

    #[test]
    fn a_key_looked_up_before_its_project_is_disabled_sees_the_change() {
        let dir = tempfile::tempdir().unwrap();
        let projects = Projects::new(SledStore::open(dir.path(), 8 << 20).unwrap());
        let issued = projects.create("Acme", Timestamp::from(0)).unwrap();
        let first = projects.authenticate(&issued.secret_key).unwrap().unwrap();
        assert!(!first.project.disabled);
        projects.set_disabled(issued.project.id, true).unwrap();
        let again = projects.authenticate(&issued.secret_key).unwrap().unwrap();
        assert!(again.project.disabled, "the remembered key was forgotten");
    }
}
