//! The dashboard's signed-in sessions, as records in the store (`keys::session`, by
//! the SHA-256 of the cookie's id), so that any node of a cluster serves a session
//! another node started, a restart signs nobody out, and a sign-out anywhere ends it
//! everywhere. The id itself is never stored (the CSRF token kept beside its digest is
//! useless without it). The binary's `dashboard::session` makes the ids and hashes them.
//!
//! On a shared store (PostgreSQL) each lookup of a session this node has seen reads its
//! record from the database first: another node may have changed or ended it. An id
//! this node has not seen (started elsewhere, or made up) is read from the database at
//! most `UNKNOWN_READS_PER_SECOND` times a second: cookies a client makes up must not
//! turn into a database read each.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::ProjectId;
use crate::store::{codec, keys, off_thread, Batch, Store};

/// Sessions held at most; past it a sign-in is refused (never another user's session
/// dropped: a tenant signing in with its own key in a loop would sign everyone out).
const MAX_SESSIONS: usize = 10_000;

/// Sessions one principal (a project's key, or the admin token) holds at most; signing in
/// past it ends that principal's own session that ends soonest.
pub const MAX_PER_PRINCIPAL: usize = 20;

/// Who signed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Principal {
    /// With a project's secret key: that project, while the key stays its key.
    Project { id: ProjectId, key_hash: [u8; 32] },
    /// With the admin token: the project picked, once picked.
    Admin { picked: Option<ProjectId> },
}

impl Principal {
    /// Who holds the session, for the per-principal cap: an admin's sessions are one
    /// owner whichever project each picked.
    fn owner(&self) -> Option<ProjectId> {
        match self {
            Principal::Project { id, .. } => Some(*id),
            Principal::Admin { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub principal: Principal,
    /// Sent back in every form; a POST without it is refused.
    pub csrf: String,
    /// Milliseconds on the server's clock.
    pub expires_at: i64,
}

/// Reads a second, per node, of session ids the node has not seen.
const UNKNOWN_READS_PER_SECOND: u32 = 50;

pub struct SessionRecords {
    store: Arc<dyn Store>,
    /// Other processes write sessions too (a cluster's nodes): read each afresh.
    shared: bool,
    /// Reads of unseen ids in the current second: (when it began, how many).
    unknown_reads: Arc<std::sync::Mutex<(std::time::Instant, u32)>>,
}

/// Whether one more unseen id may be read from the database this second.
fn may_read_unknown(reads: &std::sync::Mutex<(std::time::Instant, u32)>) -> bool {
    let mut reads = reads.lock().unwrap_or_else(|p| p.into_inner());
    if reads.0.elapsed() >= std::time::Duration::from_secs(1) {
        *reads = (std::time::Instant::now(), 0);
    }
    if reads.1 >= UNKNOWN_READS_PER_SECOND {
        return false;
    }
    reads.1 += 1;
    true
}

impl SessionRecords {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let shared = store.cluster().is_some();
        SessionRecords {
            store,
            shared,
            unknown_reads: Arc::new(std::sync::Mutex::new((std::time::Instant::now(), 0))),
        }
    }

    /// Keeps `session` under `digest`, sweeping expired sessions and the principal's
    /// oldest past its cap; false (nothing kept) when the store is full of other
    /// principals' live sessions. Durable before it answers: the next request may
    /// reach another node.
    pub async fn start(&self, digest: [u8; 32], session: Session, now: i64) -> Result<bool> {
        let store = self.store.clone();
        let started = off_thread(move || {
            let mut batch = Batch::new();
            let mut live = 0;
            let mut own: Vec<(Vec<u8>, i64)> = Vec::new();
            for kv in store.scan(keys::SESSIONS, None, false) {
                let (k, v) = kv?;
                match codec::decode::<Session>(&v) {
                    Ok(s) if s.expires_at > now => {
                        live += 1;
                        if s.principal.owner() == session.principal.owner() {
                            own.push((k, s.expires_at));
                        }
                    }
                    // Over, or unreadable: swept out on the way.
                    _ => batch.delete(k),
                }
            }
            if own.len() >= MAX_PER_PRINCIPAL {
                own.sort_unstable_by_key(|(_, end)| *end);
                for (k, _) in own.drain(..=own.len() - MAX_PER_PRINCIPAL) {
                    batch.delete(k);
                    live -= 1;
                }
            }
            let room = live < MAX_SESSIONS;
            if room {
                batch.put(keys::session(&digest), codec::encode(&session)?);
            }
            if !batch.is_empty() {
                store.apply(batch)?;
            }
            Ok(room)
        })
        .await?;
        self.store.durable().await?;
        Ok(started)
    }

    /// The live session under `digest`.
    pub async fn get(&self, digest: [u8; 32], now: i64) -> Result<Option<Session>> {
        let key = keys::session(&digest);
        let store = self.store.clone();
        let shared = self.shared;
        let reads = self.unknown_reads.clone();
        off_thread(move || {
            if shared && (store.get(&key)?.is_some() || may_read_unknown(&reads)) {
                store.reload_prefix(&key)?;
            }
            let Some(bytes) = store.get(&key)? else {
                return Ok(None);
            };
            Ok(codec::decode::<Session>(&bytes)
                .ok()
                .filter(|s| s.expires_at > now))
        })
        .await
    }

    /// Gives the session another principal (an admin's pick, a rotated key).
    pub async fn set_principal(&self, digest: [u8; 32], principal: Principal) -> Result<()> {
        let key = keys::session(&digest);
        let store = self.store.clone();
        let shared = self.shared;
        let changed = off_thread(move || {
            // Read afresh: a sign-out on another node must not be undone here.
            if shared {
                store.reload_prefix(&key)?;
            }
            let Some(bytes) = store.get(&key)? else {
                return Ok(false);
            };
            let mut s: Session = codec::decode(&bytes)?;
            s.principal = principal;
            let mut batch = Batch::new();
            batch.put(key, codec::encode(&s)?);
            store.apply(batch)?;
            Ok(true)
        })
        .await?;
        if changed {
            self.store.durable().await?;
        }
        Ok(())
    }

    pub async fn end(&self, digest: [u8; 32]) -> Result<()> {
        let mut batch = Batch::new();
        batch.delete(keys::session(&digest));
        let applied = self.store.apply(batch)?;
        self.store.durable_after(applied).await
    }

    /// How many sessions the store holds (live or not yet swept).
    pub fn held(&self) -> usize {
        self.store.scan(keys::SESSIONS, None, false).count()
    }
}
