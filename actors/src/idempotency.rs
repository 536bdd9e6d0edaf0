//! `Idempotency-Key` support, shared by /v1/track and /v1/send.
//!
//! A `Claim` is what a request brings: a scope (`track`, `send`), the client's key and
//! a hash of the request body. The writer (a project actor, so two requests with one
//! key are serialised) first calls `lookup`:
//! - `Ok(Some(reply))`: the same key with the same body within the time to live; answer
//!   `reply` again and write nothing;
//! - `Err(Conflict)`: the same key with another body;
//! - `Ok(None)`: a new (or expired) key; do the work, and `record` the reply in the
//!   same batch as the work, so that the reply is remembered if and only if the work
//!   is durable.
//!
//! Stored as `p/<project>/idem/<scope>/<key>` -> (body hash, reply as JSON, expiry), with
//! an index by expiry (`p/<project>/idem-exp/<expiry><scope>/<key>`) that `sweep` walks
//! to delete expired records, so they do not pile up for the life of the project.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::{ProjectId, Timestamp};
use crate::store::{codec, keys, Batch, Store};

/// The longest key a client may send.
pub const MAX_KEY_LEN: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    scope: String,
    key: String,
    body_hash: [u8; 32],
    ttl_ms: i64,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    body_hash: [u8; 32],
    reply: String,
    expires_at: i64,
}

impl Claim {
    /// `body` is hashed in its canonical JSON form (object keys sorted), so the same
    /// body sent with other whitespace or key order is the same body.
    pub fn new(scope: &str, key: &str, body: &serde_json::Value, ttl_ms: i64) -> Self {
        let canonical = serde_json::to_vec(body).unwrap_or_default();
        Claim {
            scope: scope.to_owned(),
            key: key.to_owned(),
            body_hash: Sha256::digest(&canonical).into(),
            ttl_ms,
        }
    }

    /// A key must be 1 to 255 visible ASCII characters.
    pub fn key_is_valid(key: &str) -> bool {
        !key.is_empty() && key.len() <= MAX_KEY_LEN && key.bytes().all(|b| b.is_ascii_graphic())
    }

    fn store_key(&self, p: ProjectId) -> Vec<u8> {
        keys::idempotency(p, &self.scope, &self.key)
    }
}

/// The remembered reply for this claim, if any (see the module documentation).
pub fn lookup<T: DeserializeOwned>(
    store: &dyn Store,
    p: ProjectId,
    claim: &Claim,
    now: Timestamp,
) -> Result<Option<T>> {
    let Some(bytes) = store.get(&claim.store_key(p))? else {
        return Ok(None);
    };
    let stored: Stored = codec::decode(&bytes)?;
    if stored.expires_at <= now.millis() {
        return Ok(None);
    }
    if stored.body_hash != claim.body_hash {
        return Err(Error::Conflict {
            message: "This Idempotency-Key was already used with a different request body".into(),
            suggestion: Some("Use a new Idempotency-Key for a different request".into()),
        });
    }
    serde_json::from_str(&stored.reply)
        .map(Some)
        .map_err(|e| Error::storage(format!("stored idempotent reply: {e}")))
}

/// Remembers `reply` for this claim, in the batch that does the work.
pub fn record<T: Serialize>(
    batch: &mut Batch,
    p: ProjectId,
    claim: &Claim,
    reply: &T,
    now: Timestamp,
) -> Result<()> {
    let stored = Stored {
        body_hash: claim.body_hash,
        reply: serde_json::to_string(reply).map_err(|e| Error::Internal(e.to_string()))?,
        expires_at: now.millis().saturating_add(claim.ttl_ms),
    };
    batch.put(claim.store_key(p), codec::encode(&stored)?);
    batch.put(
        keys::idempotency_expiry(p, stored.expires_at, &claim.scope, &claim.key),
        Vec::new(),
    );
    Ok(())
}

/// Deletes up to `max` records that expired by `now`, and answers how many. Runs on
/// the project's actor, so no request can record the same key meanwhile; a record
/// written again since its old index entry is kept (its expiry no longer matches).
pub fn sweep(store: &dyn Store, p: ProjectId, now: Timestamp, max: usize) -> Result<usize> {
    let prefix = keys::idempotency_expiries(p);
    let mut batch = Batch::new();
    let mut swept = 0;
    for kv in store.scan(&prefix, None, false).take(max) {
        let (index_key, _) = kv?;
        let rest = &index_key[prefix.len()..];
        let Some((at, scoped)) = rest.split_first_chunk::<8>() else {
            batch.delete(index_key);
            continue;
        };
        let expires_at = u64::from_be_bytes(*at) as i64;
        if expires_at > now.millis() {
            break;
        }
        let scoped = String::from_utf8_lossy(scoped);
        if let Some((scope, key)) = scoped.split_once('/') {
            let record_key = keys::idempotency(p, scope, key);
            if let Some(bytes) = store.get(&record_key)? {
                // A record that cannot be read is dropped with its index entry, rather
                // than stopping every later sweep of this project at it.
                let current =
                    codec::decode::<Stored>(&bytes).map_or(true, |s| s.expires_at == expires_at);
                if current {
                    batch.delete(record_key);
                    swept += 1;
                }
            }
        }
        batch.delete(index_key);
    }
    if !batch.is_empty() {
        store.apply(batch)?;
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledStore;
    use serde_json::json;

    #[tokio::test]
    async fn a_replay_returns_the_first_reply_and_another_body_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let p = ProjectId::new();
        let now = Timestamp::from(1_000);
        let claim = Claim::new("track", "k1", &json!({"a": 1, "b": 2}), 10_000);
        assert_eq!(lookup::<String>(&*store, p, &claim, now).unwrap(), None);
        let mut batch = Batch::new();
        record(&mut batch, p, &claim, &"first".to_owned(), now).unwrap();
        store.apply(batch).unwrap();

        let same = Claim::new("track", "k1", &json!({"b": 2, "a": 1}), 10_000);
        assert_eq!(
            lookup::<String>(&*store, p, &same, now).unwrap().as_deref(),
            Some("first")
        );
        let other = Claim::new("track", "k1", &json!({"a": 2}), 10_000);
        assert!(matches!(
            lookup::<String>(&*store, p, &other, now),
            Err(Error::Conflict { .. })
        ));
        let other_scope = Claim::new("send", "k1", &json!({"a": 2}), 10_000);
        assert_eq!(
            lookup::<String>(&*store, p, &other_scope, now).unwrap(),
            None
        );
        let later = Timestamp::from(11_000);
        assert_eq!(
            lookup::<String>(&*store, p, &other, later).unwrap(),
            None,
            "expired"
        );
    }

    #[tokio::test]
    async fn expired_records_are_swept_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let p = ProjectId::new();
        let mut batch = Batch::new();
        for (key, ttl) in [("old", 1_000), ("new", 100_000)] {
            let claim = Claim::new("track", key, &json!({}), ttl);
            record(&mut batch, p, &claim, &key.to_owned(), Timestamp::from(0)).unwrap();
        }
        store.apply(batch).unwrap();
        assert_eq!(sweep(&*store, p, Timestamp::from(500), 100).unwrap(), 0);
        assert_eq!(sweep(&*store, p, Timestamp::from(5_000), 100).unwrap(), 1);
        assert!(store
            .get(&keys::idempotency(p, "track", "old"))
            .unwrap()
            .is_none());
        assert!(store
            .get(&keys::idempotency(p, "track", "new"))
            .unwrap()
            .is_some());
        let index: Vec<_> = store
            .scan(&keys::idempotency_expiries(p), None, false)
            .collect();
        assert_eq!(index.len(), 1, "only the live record's index entry is left");
    }

    #[test]
    fn keys_are_visible_ascii_up_to_255() {
        assert!(Claim::key_is_valid("order-123_ABC"));
        assert!(!Claim::key_is_valid(""));
        assert!(!Claim::key_is_valid("has space"));
        assert!(!Claim::key_is_valid(&"k".repeat(256)));
    }
}
