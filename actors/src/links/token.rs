//! The bytes of a link token.
//!
//! A token is `base64url(2 || nonce || AES-256-GCM-SIV(payload) || tag)`. The payload
//! (kind, project, link generation, issue day, ids, URL) is encrypted under a key derived
//! from the server's link secret, so a recipient sees no id. The 12-byte nonce is the
//! payload's HMAC-SHA256 under the project's own link key (derived from the secret, the
//! project id and its generation): a token is signed per project, a rotation that
//! advances the generation can tell old tokens from new ones, and the same link always
//! gives the same token (the unsubscribe URL is made twice per email, for the template's
//! variable and for the header, and the two must match).
//!
//! The format before it, `base64url(kind || ids || url || first 16 bytes of
//! HMAC-SHA256)` under the secret itself, is still read: unsubscribe links in mail
//! already sent must keep working.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM_SIV, NONCE_LEN};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::model::ProjectId;

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 2;
const TAG_LEN: usize = 16;
const LEGACY_MAC_LEN: usize = 16;
/// kind, project, generation, issue day.
pub const HEAD_LEN: usize = 1 + 16 + 4 + 4;

/// When and under which generation of its project's link key a token was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issue {
    pub generation: u32,
    /// Days since 1970-01-01 (UTC).
    pub day: u32,
}

/// How an opened token was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    Sealed(Issue),
    /// The old format: no generation, no date.
    Legacy,
}

pub struct Sealer {
    secret: [u8; 32],
    seal: LessSafeKey,
}

/// HMAC-SHA256 of the joined parts under `key`: a key derivation with a label, or a mac.
fn prf(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(part);
    }
    mac
}

impl Sealer {
    pub fn new(secret: [u8; 32]) -> Self {
        let key = prf(&secret, &[b"mailroom links: payload encryption"])
            .finalize()
            .into_bytes();
        let seal = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM_SIV, &key).expect("AES-256 takes a 32-byte key"),
        );
        Sealer { secret, seal }
    }

    /// The mac of a payload under its project's key of `generation`.
    fn project_mac(&self, project: &[u8], generation: u32, payload: &[u8]) -> HmacSha256 {
        let key = prf(
            &self.secret,
            &[
                b"mailroom links: project",
                project,
                &generation.to_be_bytes(),
            ],
        )
        .finalize()
        .into_bytes();
        prf(&key, &[&[VERSION], payload])
    }

    /// A token for `body` (what follows the head in the payload).
    pub fn seal(&self, kind: u8, project: ProjectId, issue: Issue, body: &[&[u8]]) -> String {
        let mut payload =
            Vec::with_capacity(HEAD_LEN + body.iter().map(|b| b.len()).sum::<usize>());
        payload.push(kind);
        payload.extend_from_slice(project.as_bytes());
        payload.extend_from_slice(&issue.generation.to_be_bytes());
        payload.extend_from_slice(&issue.day.to_be_bytes());
        for part in body {
            payload.extend_from_slice(part);
        }
        let mac = self
            .project_mac(project.as_bytes(), issue.generation, &payload)
            .finalize()
            .into_bytes();
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&mac[..NONCE_LEN]);
        self.seal
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from([VERSION]),
                &mut payload,
            )
            .expect("sealing a short payload does not fail");
        let mut bytes = Vec::with_capacity(1 + NONCE_LEN + payload.len());
        bytes.push(VERSION);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&payload);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The payload of a token this server made, and how it was made; None for anything
    /// else.
    pub fn open(&self, token: &str) -> Option<(Vec<u8>, Made)> {
        let mut bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        if bytes.first() == Some(&VERSION) && bytes.len() >= 1 + NONCE_LEN + HEAD_LEN + TAG_LEN {
            if let Some(opened) = self.open_sealed(&mut bytes) {
                return Some(opened);
            }
        }
        self.open_legacy(token)
            .map(|payload| (payload, Made::Legacy))
    }

    fn open_sealed(&self, bytes: &mut [u8]) -> Option<(Vec<u8>, Made)> {
        let (head, sealed) = bytes.split_at_mut(1 + NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = head[1..].try_into().ok()?;
        let payload = self
            .seal
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from([VERSION]),
                sealed,
            )
            .ok()?;
        let project = &payload[1..17];
        let number =
            |at: usize| u32::from_be_bytes(payload[at..at + 4].try_into().unwrap_or_default());
        let issue = Issue {
            generation: number(17),
            day: number(21),
        };
        self.project_mac(project, issue.generation, payload)
            .verify_truncated_left(&nonce)
            .ok()?;
        Some((payload.to_vec(), Made::Sealed(issue)))
    }

    fn open_legacy(&self, token: &str) -> Option<Vec<u8>> {
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        let split = bytes.len().checked_sub(LEGACY_MAC_LEN)?;
        let (payload, tag) = bytes.split_at(split);
        prf(&self.secret, &[payload])
            .verify_truncated_left(tag)
            .ok()?;
        Some(payload.to_vec())
    }

    /// A token in the old format, as servers before the sealed one made them.
    #[cfg(test)]
    pub fn legacy(&self, payload: &[u8]) -> String {
        let tag = prf(&self.secret, &[payload]).finalize().into_bytes();
        let mut bytes = payload.to_vec();
        bytes.extend_from_slice(&tag[..LEGACY_MAC_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }
}
