//! The envelope sender of every email when `feedback.return_path_domain` is set:
//! `b-<token>@<domain>`, the token naming the email and signed, so a delivery report
//! mailed back to it finds its email, and a forged address is refused at RCPT.
//!
//! The token is base32 (lower case; an MTA may fold a local part's case) of the email's
//! 16-byte id and the first 8 bytes of an HMAC-SHA256 of it under a key derived from the
//! server's link key: 39 characters, inside the 64 a local part may have.

use data_encoding::BASE32_NOPAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::id::KeyId;
use crate::model::EmailId;

const TAG: usize = 8;

pub struct ReturnPath {
    domain: String,
    key: [u8; 32],
}

impl ReturnPath {
    pub fn new(domain: &str, link_key: &[u8; 32]) -> ReturnPath {
        let mut mac = Hmac::<Sha256>::new_from_slice(link_key).expect("HMAC takes any key");
        mac.update(b"mailroom return path");
        ReturnPath {
            domain: domain.trim().trim_end_matches('.').to_ascii_lowercase(),
            key: mac.finalize().into_bytes().into(),
        }
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The token's signature: over the email's id, and for an address at a sender's
    /// `psrp.` host over that host too, so a token seen in one envelope works only at
    /// the host it was given for.
    fn tag(&self, id: &[u8], host: Option<&str>) -> [u8; TAG] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(id);
        if let Some(host) = host {
            mac.update(b"@");
            mac.update(host.to_ascii_lowercase().as_bytes());
        }
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; TAG];
        tag.copy_from_slice(&full[..TAG]);
        tag
    }

    /// The envelope sender of email `id`.
    #[cfg(test)]
    pub fn address(&self, id: EmailId) -> String {
        self.address_at(id, None)
    }

    /// The envelope sender of email `id` at `host` (the sender domain's `psrp.` host,
    /// a CNAME to this domain), or at this domain.
    pub(crate) fn address_at(&self, id: EmailId, host: Option<&str>) -> String {
        let mut raw = id.as_bytes().to_vec();
        raw.extend_from_slice(&self.tag(id.as_bytes(), host));
        let token = BASE32_NOPAD.encode(&raw).to_ascii_lowercase();
        format!("b-{token}@{}", host.unwrap_or(&self.domain))
    }

    /// The email an address names, when it is one of ours (this domain or a sender's
    /// `psrp.` host, and a token whose signature checks); None for anything else.
    pub fn open(&self, address: &str) -> Option<EmailId> {
        let (local, domain) = address.trim().rsplit_once('@')?;
        let domain = domain.trim_end_matches('.');
        let label = crate::domain::model::RETURN_PATH_LABEL;
        let aligned = domain
            .split_once('.')
            .is_some_and(|(first, rest)| first.eq_ignore_ascii_case(label) && !rest.is_empty());
        if !aligned && !domain.eq_ignore_ascii_case(&self.domain) {
            return None;
        }
        let token = local
            .get(..2)
            .filter(|p| p.eq_ignore_ascii_case("b-"))
            .and(local.get(2..))?;
        if token.len() != 39 {
            return None;
        }
        let raw = BASE32_NOPAD
            .decode(token.to_ascii_uppercase().as_bytes())
            .ok()?;
        let (id, tag) = raw.split_at_checked(16)?;
        let want = self.tag(id, aligned.then_some(domain));
        // Constant time: a forger learns nothing from how long the refusal took.
        let same = tag.len() == TAG && want.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
        if !same {
            return None;
        }
        let id: [u8; 16] = id.try_into().ok()?;
        Some(EmailId::from_key_bytes(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_opens_to_its_email_in_any_case_and_a_changed_one_does_not() {
        let rp = ReturnPath::new("Bounces.Example.com.", &[7; 32]);
        let id = EmailId::new();
        let address = rp.address(id);
        assert!(
            address.starts_with("b-") && address.ends_with("@bounces.example.com"),
            "{address}"
        );
        assert!(address.split('@').next().unwrap().len() <= 64);
        assert_eq!(rp.open(&address), Some(id));
        assert_eq!(rp.open(&address.to_ascii_uppercase()), Some(id));
        // One character changed, another domain, another key: refused.
        let mut forged = address.clone().into_bytes();
        forged[5] = if forged[5] == b'a' { b'b' } else { b'a' };
        assert_eq!(rp.open(std::str::from_utf8(&forged).unwrap()), None);
        assert_eq!(
            rp.open(&address.replace("example.com", "example.org")),
            None
        );
        assert_eq!(
            ReturnPath::new("bounces.example.com", &[8; 32]).open(&address),
            None
        );
        assert_eq!(rp.open("postmaster@bounces.example.com"), None);
        // An aligned address opens at its own host only.
        let aligned = rp.address_at(id, Some("psrp.acme.test"));
        assert!(aligned.ends_with("@psrp.acme.test"), "{aligned}");
        assert_eq!(rp.open(&aligned), Some(id));
        assert_eq!(rp.open(&aligned.to_ascii_uppercase()), Some(id));
        assert_eq!(
            rp.open(&aligned.replace("psrp.acme.test", "psrp.other.test")),
            None
        );
        assert_eq!(
            rp.open(&aligned.replace("psrp.acme.test", "bounces.example.com")),
            None
        );
        let plain_token = address.split('@').next().unwrap();
        assert_eq!(rp.open(&format!("{plain_token}@psrp.acme.test")), None);
        assert_eq!(rp.open("b-@bounces.example.com"), None);
    }
}
