//! DKIM key pairs: RSA 2048 (what every receiver verifies), a random selector per
//! domain record so that two projects adding the same domain never collide, and the
//! ownership token.

use base64::Engine;
use rand::distributions::{Alphanumeric, DistString};
use rand::Rng;
use rsa::pkcs1::{EncodeRsaPrivateKey, LineEnding};
use rsa::pkcs8::EncodePublicKey;
use rsa::RsaPrivateKey;

use crate::error::{Error, Result};

const KEY_BITS: usize = 2048;
const SELECTOR_RANDOM_LEN: usize = 10;
const TOKEN_LEN: usize = 32;

#[derive(Clone)]
pub struct DkimKey {
    pub selector: String,
    /// Base64 of the DER SubjectPublicKeyInfo.
    pub public_key: String,
    /// PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`), which lettre's `DkimSigningKey::new` reads.
    pub private_key_pem: String,
}

impl std::fmt::Debug for DkimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DkimKey")
            .field("selector", &self.selector)
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

/// CPU-heavy (a fraction of a second): call it from a blocking thread.
pub fn generate() -> Result<DkimKey> {
    let mut rng = rand::thread_rng();
    let private = RsaPrivateKey::new(&mut rng, KEY_BITS)
        .map_err(|e| Error::Internal(format!("generating a DKIM key: {e}")))?;
    let pem = private
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| Error::Internal(format!("encoding a DKIM key: {e}")))?;
    let der = private
        .to_public_key()
        .to_public_key_der()
        .map_err(|e| Error::Internal(format!("encoding a DKIM public key: {e}")))?;
    Ok(DkimKey {
        selector: selector(&mut rng),
        public_key: base64::engine::general_purpose::STANDARD.encode(der.as_bytes()),
        private_key_pem: pem.to_string(),
    })
}

/// `mr` and lowercase letters and digits (selectors are DNS labels).
fn selector(rng: &mut impl Rng) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut s = String::from("mr");
    for _ in 0..SELECTOR_RANDOM_LEN {
        s.push(CHARS[rng.gen_range(0..CHARS.len())] as char);
    }
    s
}

pub fn ownership_token() -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), TOKEN_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailer::mime::RsaSha256Key;
    use rsa::pkcs8::DecodePublicKey;

    #[test]
    fn a_generated_key_is_usable_by_the_signer_and_its_public_half_decodes() {
        let key = generate().unwrap();
        assert!(key.selector.starts_with("mr") && key.selector.len() == 12);
        assert!(key
            .private_key_pem
            .starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        RsaSha256Key::from_pkcs1_pem(&key.private_key_pem).expect("the signer reads the key");
        let der = base64::engine::general_purpose::STANDARD
            .decode(&key.public_key)
            .unwrap();
        rsa::RsaPublicKey::from_public_key_der(&der).expect("SubjectPublicKeyInfo DER");
        assert_ne!(ownership_token(), ownership_token());
    }
}
