//! Projects and their keys: create, list, disable, enable, rotate, and the lookup that
//! authenticates a request. Used by the CLI (server stopped) and the admin API.
//! Writes are applied here; the caller makes them durable (`Store::durable` or
//! `Store::flush_blocking`) before it reports success.

use std::sync::Arc;

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
}

impl Projects {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Projects { store }
    }

    pub fn create(&self, name: &str, now: Timestamp) -> Result<IssuedKeys> {
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
        Ok(IssuedKeys {
            project,
            secret_key,
            public_key,
        })
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

    pub fn set_disabled(&self, id: ProjectId, disabled: bool) -> Result<Project> {
        let mut project = self.get(id)?;
        project.disabled = disabled;
        let mut batch = Batch::new();
        self.put(&mut batch, &project)?;
        self.store.apply(batch)?;
        Ok(project)
    }

    /// Issues new keys; the old ones stop working at once.
    pub fn rotate_keys(&self, id: ProjectId) -> Result<IssuedKeys> {
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
        self.store.apply(batch)?;
        Ok(IssuedKeys {
            project,
            secret_key,
            public_key,
        })
    }

    /// The project a key belongs to, or None for an unknown key.
    pub fn authenticate(&self, key: &ApiKey) -> Result<Option<Authenticated>> {
        let hash = key.hash();
        let Some(id) = self.store.get(&keys::key_hash(&hash))? else {
            return Ok(None);
        };
        let id: ProjectId = std::str::from_utf8(&id)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Storage("bad key index entry".into()))?;
        let project = self.get(id)?;
        Ok(Some(Authenticated {
            project,
            kind: key.kind(),
        }))
    }

    fn put(&self, batch: &mut Batch, project: &Project) -> Result<()> {
        batch.put(keys::project(project.id), codec::encode(project)?);
        Ok(())
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
        let rotated = projects.rotate_keys(issued.project.id).unwrap();
        assert!(projects.authenticate(&issued.secret_key).unwrap().is_none());
        assert!(projects.authenticate(&issued.public_key).unwrap().is_none());
        let auth = projects.authenticate(&rotated.public_key).unwrap().unwrap();
        assert_eq!(auth.kind, KeyKind::Public);
        assert_eq!(projects.list().unwrap().len(), 1);
    }
}
