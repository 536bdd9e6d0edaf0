//! Signed-in sessions, kept in memory: a restart signs everyone out, which is the price
//! of keeping no session secret on disk. The cookie carries a random 256-bit id; the map
//! is keyed by its SHA-256, so a lookup's timing says nothing about the ids held.

use std::collections::HashMap;
use std::sync::Mutex;

use mailroom_actors::model::ProjectId;
use sha2::{Digest, Sha256};

/// Sessions held at most; past it a sign-in is refused (never another user's session
/// dropped: a tenant signing in with its own key in a loop would sign everyone out).
const MAX_SESSIONS: usize = 10_000;

/// Sessions one principal (a project's key, or the admin token) holds at most; signing in
/// past it ends that principal's own session that ends soonest.
const MAX_PER_PRINCIPAL: usize = 20;

pub const COOKIE: &str = "mailroom_session";

/// Who signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
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

#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    /// Sent back in every form; a POST without it is refused.
    pub csrf: String,
    /// Milliseconds on the server's clock.
    pub expires_at: i64,
}

#[derive(Default)]
pub struct Sessions {
    by_hash: Mutex<HashMap<[u8; 32], Session>>,
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
    /// Starts a session; answers its id, for the cookie, or None when the store is full
    /// of other principals' live sessions.
    pub fn start(&self, principal: Principal, now: i64, lifetime_ms: i64) -> Option<String> {
        let id = random_token();
        let session = Session {
            principal,
            csrf: random_token(),
            expires_at: now.saturating_add(lifetime_ms),
        };
        let mut map = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| s.expires_at > now);
        let same = |s: &Session| s.principal.owner() == session.principal.owner();
        let mut own: Vec<([u8; 32], i64)> = map
            .iter()
            .filter(|(_, s)| same(s))
            .map(|(k, s)| (*k, s.expires_at))
            .collect();
        if own.len() >= MAX_PER_PRINCIPAL {
            own.sort_unstable_by_key(|(_, end)| *end);
            for (k, _) in &own[..=own.len() - MAX_PER_PRINCIPAL] {
                map.remove(k);
            }
        }
        if map.len() >= MAX_SESSIONS {
            return None;
        }
        map.insert(digest(&id), session);
        Some(id)
    }

    /// The live session with this id; an expired one is forgotten.
    pub fn get(&self, id: &str, now: i64) -> Option<Session> {
        let key = digest(id);
        let mut map = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&key) {
            Some(s) if s.expires_at > now => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    pub fn set_principal(&self, id: &str, principal: Principal) {
        let mut map = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get_mut(&digest(id)) {
            s.principal = principal;
        }
    }

    pub fn end(&self, id: &str) {
        let mut map = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&digest(id));
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

    #[test]
    fn a_session_ends_when_it_expires_and_when_it_is_ended() {
        let sessions = Sessions::default();
        let admin = Principal::Admin { picked: None };
        let id = sessions.start(admin.clone(), 1_000, 60_000).unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(sessions.get(&id, 60_999).map(|s| s.principal), Some(admin));
        assert!(sessions.get(&id, 61_000).is_none());
        let again = sessions
            .start(Principal::Admin { picked: None }, 1_000, 60_000)
            .unwrap();
        sessions.end(&again);
        assert!(sessions.get(&again, 1_001).is_none());
        assert!(sessions.get("not-an-id", 1_001).is_none());
    }

    #[test]
    fn signing_in_again_and_again_ends_only_the_same_principals_oldest_sessions() {
        let sessions = Sessions::default();
        let other = sessions
            .start(Principal::Admin { picked: None }, 0, 60_000)
            .unwrap();
        let tenant = Principal::Project {
            id: ProjectId::new(),
            key_hash: [7; 32],
        };
        let first = sessions.start(tenant.clone(), 0, 60_000).unwrap();
        let mut last = String::new();
        for t in 1..=MAX_PER_PRINCIPAL as i64 * 3 {
            last = sessions.start(tenant.clone(), t, 60_000).unwrap();
        }
        assert!(
            sessions.get(&other, 100).is_some(),
            "another user's session stays"
        );
        assert!(
            sessions.get(&first, 100).is_none(),
            "the tenant's oldest went"
        );
        assert!(sessions.get(&last, 100).is_some());
        let held = sessions.by_hash.lock().unwrap().len();
        assert_eq!(held, MAX_PER_PRINCIPAL + 1);
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
