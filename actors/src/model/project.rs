//! Projects and their API keys. A key is `sk_` or `pk_` followed by 40 random
//! alphanumerics; only its SHA-256 is stored. A fast hash is enough because the keys
//! carry about 238 bits of entropy: there is nothing to brute-force.

use rand::distributions::{Alphanumeric, DistString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ProjectId;

const KEY_RANDOM_LEN: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyKind {
    Secret,
    Public,
}

impl KeyKind {
    fn prefix(self) -> &'static str {
        match self {
            KeyKind::Secret => "sk_",
            KeyKind::Public => "pk_",
        }
    }
}

/// A key as presented by a client. Its kind comes from its prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    kind: KeyKind,
    raw: String,
}

impl ApiKey {
    pub fn generate(kind: KeyKind) -> Self {
        let random = Alphanumeric.sample_string(&mut rand::thread_rng(), KEY_RANDOM_LEN);
        ApiKey {
            kind,
            raw: format!("{}{}", kind.prefix(), random),
        }
    }

    /// Recognises the shape of a key; whether it exists is the store's question.
    pub fn parse(raw: &str) -> Option<Self> {
        let kind = if raw.starts_with("sk_") {
            KeyKind::Secret
        } else if raw.starts_with("pk_") {
            KeyKind::Public
        } else {
            return None;
        };
        let rest = &raw[3..];
        if rest.len() < 32 || rest.len() > 128 || !rest.chars().all(|c| c.is_ascii_alphanumeric()) {
            return None;
        }
        Some(ApiKey {
            kind,
            raw: raw.to_owned(),
        })
    }

    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    pub fn expose(&self) -> &str {
        &self.raw
    }

    pub fn hash(&self) -> [u8; 32] {
        Sha256::digest(self.raw.as_bytes()).into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Project {
    pub id: ProjectId,
    pub name: String,
    pub disabled: bool,
    pub secret_key_hash: [u8; 32],
    pub public_key_hash: [u8; 32],
    pub created_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_back_with_their_kind() {
        let sk = ApiKey::generate(KeyKind::Secret);
        assert!(sk.expose().starts_with("sk_"));
        assert_eq!(ApiKey::parse(sk.expose()).unwrap().kind(), KeyKind::Secret);
        let pk = ApiKey::generate(KeyKind::Public);
        assert_eq!(ApiKey::parse(pk.expose()).unwrap().kind(), KeyKind::Public);
        assert_ne!(sk.hash(), pk.hash());
    }

    #[test]
    fn short_or_unprefixed_keys_are_not_keys() {
        assert!(ApiKey::parse("sk_short").is_none());
        assert!(ApiKey::parse(&format!("xx_{}", "a".repeat(40))).is_none());
        assert!(ApiKey::parse(&format!("sk_{}!", "a".repeat(40))).is_none());
    }
}
