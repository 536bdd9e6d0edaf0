//! Standard Webhooks signatures (the scheme of Svix and Resend, so receivers have a
//! library for it): `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the base64-decoded part of the
//! `whsec_` secret. During a rotation both secrets sign, space separated.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

/// `v1,<signature>` of one message with one secret.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix(PREFIX).unwrap_or(secret))
        .unwrap_or_else(|_| secret.as_bytes().to_vec());
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes any key");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per secret, space separated.
pub fn header(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| sign(s, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own vector (standard-webhooks, libraries/rust `test_sign`).
    #[test]
    fn the_specifications_test_vector_signs_the_same() {
        assert_eq!(
            sign(
                "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#,
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn a_new_secret_is_32_random_bytes_and_two_secrets_both_sign() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(STANDARD.decode(&a[PREFIX.len()..]).unwrap().len(), 32);
        let h = header(&[&a, &b], "id", 1, b"x");
        assert_eq!(h.split(' ').count(), 2);
        assert!(h.starts_with(&sign(&a, "id", 1, b"x")));
    }
}
