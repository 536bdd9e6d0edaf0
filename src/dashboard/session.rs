//! Signed-in sessions of the dashboard: the cookie carries a random 256-bit id, and the
//! engine keeps each session by the id's SHA-256 (`mailroom_actors::sessions`), in the
//! store, so that any node serves it and a restart signs nobody out. A lookup's timing
//! says nothing about the ids held.

use std::sync::Arc;

use mailroom_actors::engine::projects::SessionRecords;
pub use mailroom_actors::engine::projects::{Principal, Session};
use mailroom_actors::store::Store;
use mailroom_actors::Error;
use sha2::{Digest, Sha256};

pub const COOKIE: &str = "mailroom_session";

pub struct Sessions {
    records: SessionRecords,
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

impl Sessions {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Sessions {
            records: SessionRecords::new(store),
        }
    }

    /// Starts a session; answers its id, for the cookie, or None when the store is full
    /// of other principals' live sessions.
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
        let kept = self.records.start(digest(&id), session, now).await?;
        Ok(kept.then_some(id))
    }

    /// The live session with this id.
    pub async fn get(&self, id: &str, now: i64) -> Result<Option<Session>, Error> {
        self.records.get(digest(id), now).await
    }

    pub async fn set_principal(&self, id: &str, principal: Principal) -> Result<(), Error> {
        self.records.set_principal(digest(id), principal).await
    }

    pub async fn end(&self, id: &str) -> Result<(), Error> {
        self.records.end(digest(id)).await
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
    use mailroom_actors::model::ProjectId;
    use mailroom_actors::store::{SledStore, Store};

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
        for t in 1..=mailroom_actors::engine::projects::MAX_PER_PRINCIPAL as i64 * 3 {
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
        let held = sessions.records.held();
        assert_eq!(
            held,
            mailroom_actors::engine::projects::MAX_PER_PRINCIPAL + 1
        );
    }

    #[actix_web::test]
    async fn the_store_keeps_the_ids_digest_not_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 8 << 20).unwrap();
        let sessions = Sessions::new(store.clone());
        let id = sessions
            .start(Principal::Admin { picked: None }, 0, 60_000)
            .await
            .unwrap()
            .unwrap();
        for kv in store.scan(b"", None, false) {
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
