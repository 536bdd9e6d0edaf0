//! Signed-in sessions, kept in the store (`keys::session`), so that any node of a
//! cluster serves a session another node started, a restart signs nobody out, and a
//! sign-out anywhere ends it everywhere. The cookie carries a random 256-bit id; the
//! store keys a session by the id's SHA-256, so neither the store nor a lookup's timing
//! gives the id away (the CSRF token kept beside it is useless without it).
//!
//! On a shared store (PostgreSQL) each lookup reads the session's record from the
//! database first: another node may have started, changed or ended it.

use std::sync::Arc;

use mailroom_actors::model::ProjectId;
use mailroom_actors::store::{codec, keys, Batch, Store};
use mailroom_actors::Error;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Sessions held at most; past it a sign-in is refused (never another user's session
/// dropped: a tenant signing in with its own key in a loop would sign everyone out).
const MAX_SESSIONS: usize = 10_000;

/// Sessions one principal (a project's key, or the admin token) holds at most; signing in
/// past it ends that principal's own session that ends soonest.
const MAX_PER_PRINCIPAL: usize = 20;

pub const COOKIE: &str = "mailroom_session";

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

pub struct Sessions {
    store: Arc<dyn Store>,
    /// Other processes write sessions too (a cluster's nodes): read each afresh.
    shared: bool,
}

/// 32 random bytes as 64 hex digits.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The OS's generator failing is not something a sign-in can work around.
    getrandom::fill(&mut bytes).expect("the OS random number generator");
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// Runs store work that may wait on the database off the async threads.
async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    actix_web::rt::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("a session's store work: {e}")))?
}

impl Sessions {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let shared = store.cluster().is_some();
        Sessions { store, shared }
    }

    /// Starts a session; answers its id, for the cookie, or None when the store is full
    /// of other principals' live sessions. Durable before it answers: the next request
    /// may reach another node.
    pub async fn start(
        &self,
        principal: Principal,
        now: i64,
        lifetime_ms: i64,
    ) -> Result<Option<String>, Error> {
        let id = random_token();
        let session = Session {
            principal,
            csrf: random_token(),
            expires_at: now.saturating_add(lifetime_ms),
        };
        let store = self.store.clone();
        let key = keys::session(&digest(&id));
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
                batch.put(key, codec::encode(&session)?);
            }
            if !batch.is_empty() {
                store.apply(batch)?;
            }
            Ok(room)
        })
        .await?;
        self.store.durable().await?;
        Ok(started.then_some(id))
    }

    /// The live session with this id.
    pub async fn get(&self, id: &str, now: i64) -> Result<Option<Session>, Error> {
        let key = keys::session(&digest(id));
        let store = self.store.clone();
        let shared = self.shared;
        off_thread(move || {
            if shared {
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
    pub async fn set_principal(&self, id: &str, principal: Principal) -> Result<(), Error> {
        let key = keys::session(&digest(id));
        let store = self.store.clone();
        let changed = off_thread(move || {
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

    pub async fn end(&self, id: &str) -> Result<(), Error> {
        let mut batch = Batch::new();
        batch.delete(keys::session(&digest(id)));
        self.store.apply(batch)?;
        self.store.durable().await
    }
}

/// Whether a form's token is the session's, compared in constant time over digests
/// (so a wrong length answers as slowly as a wrong byte).
pub fn csrf_matches(expected: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    digest(expected).ct_eq(&digest(given)).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom_actors::store::SledStore;

    fn sessions() -> (tempfile::TempDir, Sessions) {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        (dir, Sessions::new(store))
    }

    #[actix_web::test]
    async fn a_session_ends_when_it_expires_and_when_it_is_ended() {
        let (_dir, sessions) = sessions();
        let admin = Principal::Admin { picked: None };
        let id = sessions
            .start(admin.clone(), 1_000, 60_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id.len(), 64);
        let got = sessions.get(&id, 60_999).await.unwrap();
        assert_eq!(got.map(|s| s.principal), Some(admin));
        assert!(sessions.get(&id, 61_000).await.unwrap().is_none());
        let again = sessions
            .start(Principal::Admin { picked: None }, 1_000, 60_000)
            .await
            .unwrap()
            .unwrap();
        sessions.end(&again).await.unwrap();
        assert!(sessions.get(&again, 1_001).await.unwrap().is_none());
        assert!(sessions.get("not-an-id", 1_001).await.unwrap().is_none());
    }

    #[actix_web::test]
    async fn signing_in_again_and_again_ends_only_the_same_principals_oldest_sessions() {
        let (_dir, sessions) = sessions();
        let other = sessions
            .start(Principal::Admin { picked: None }, 0, 60_000)
            .await
            .unwrap()
            .unwrap();
        let tenant = Principal::Project {
            id: ProjectId::new(),
            key_hash: [7; 32],
        };
        let first = sessions
            .start(tenant.clone(), 0, 60_000)
            .await
            .unwrap()
            .unwrap();
        let mut last = String::new();
        for t in 1..=MAX_PER_PRINCIPAL as i64 * 3 {
            last = sessions
                .start(tenant.clone(), t, 60_000)
                .await
                .unwrap()
                .unwrap();
        }
        assert!(
            sessions.get(&other, 100).await.unwrap().is_some(),
            "another user's session stays"
        );
        assert!(
            sessions.get(&first, 100).await.unwrap().is_none(),
            "the tenant's oldest went"
        );
        assert!(sessions.get(&last, 100).await.unwrap().is_some());
        let held = sessions.store.scan(keys::SESSIONS, None, false).count();
        assert_eq!(held, MAX_PER_PRINCIPAL + 1);
    }

    #[actix_web::test]
    async fn the_store_keeps_the_ids_digest_not_the_id() {
        let (_dir, sessions) = sessions();
        let id = sessions
            .start(Principal::Admin { picked: None }, 0, 60_000)
            .await
            .unwrap()
            .unwrap();
        for kv in sessions.store.scan(b"", None, false) {
            let (k, v) = kv.unwrap();
            let hay = [k, v].concat();
            assert!(
                !hay.windows(id.len()).any(|w| w == id.as_bytes()),
                "the session id is in the store"
            );
        }
    }

    #[test]
    fn only_the_sessions_own_csrf_token_matches() {
        let token = random_token();
        assert!(csrf_matches(&token, &token));
        assert!(!csrf_matches(&token, &token[..63]));
        assert!(!csrf_matches(&token, ""));
        assert!(!csrf_matches(&token, &random_token()));
    }
}
