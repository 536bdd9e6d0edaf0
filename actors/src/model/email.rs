//! An email address that is known to be well formed, trimmed and lowercased.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{field_de_error, FieldCode};

/// RFC 5321 caps a forward path at 256 octets including the angle brackets.
pub const MAX_EMAIL_LEN: usize = 254;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EmailAddress(String);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailError {
    TooLong,
    Invalid(Flaw),
}

impl EmailError {
    pub fn code(&self) -> FieldCode {
        match self {
            EmailError::TooLong => FieldCode::TooBig,
            EmailError::Invalid(_) => FieldCode::InvalidString,
        }
    }
}

/// The message of the field error.
impl fmt::Display for EmailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmailError::TooLong => write!(f, "Email must be at most {MAX_EMAIL_LEN} characters"),
            EmailError::Invalid(flaw) => write!(f, "Invalid email: {flaw}"),
        }
    }
}

/// Why a string is not an address, in words a sender can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    Empty,
    Spaces,
    NoAt,
    ManyAts,
    EmptyLocal,
    EmptyDomain,
    LocalDots,
    LocalTooLong,
    DomainNeedsDot,
    DomainEmptyLabel,
    DomainHyphen,
    AddressLiteral,
    Character,
    Shape,
}

impl fmt::Display for Flaw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flaw::Empty => "it is empty",
            Flaw::Spaces => "it contains a space or a control character",
            Flaw::NoAt => "there is no @",
            Flaw::ManyAts => "there is more than one @",
            Flaw::EmptyLocal => "the part before @ is empty",
            Flaw::EmptyDomain => "the part after @ is empty",
            Flaw::LocalDots => {
                "the part before @ starts or ends with a dot, or has two dots in a row"
            }
            Flaw::LocalTooLong => "the part before @ is longer than 64 characters",
            Flaw::DomainNeedsDot => "the domain needs a dot (as in example.com)",
            Flaw::DomainEmptyLabel => {
                "the domain starts or ends with a dot, or has two dots in a row"
            }
            Flaw::DomainHyphen => "a part of the domain starts or ends with a hyphen",
            Flaw::AddressLiteral => "address literals such as [192.0.2.1] are not accepted",
            Flaw::Character => "it contains a character that addresses cannot have",
            Flaw::Shape => "it is not in the form name@example.com",
        })
    }
}

impl EmailAddress {
    /// Trims and lowercases, then checks the syntax that deliverable addresses use:
    /// a dot-atom or quoted local part, and a domain with at least one dot.
    pub fn parse(raw: &str) -> Result<Self, EmailError> {
        let s = raw.trim().to_lowercase();
        if s.len() > MAX_EMAIL_LEN {
            return Err(EmailError::TooLong);
        }
        if let Some(flaw) = flaw(&s) {
            return Err(EmailError::Invalid(flaw));
        }
        email_address::EmailAddress::from_str(&s).map_err(|e| {
            use email_address::Error as E;
            EmailError::Invalid(match e {
                E::InvalidCharacter | E::UnbalancedQuotes | E::InvalidComment => Flaw::Character,
                E::LocalPartTooLong => Flaw::LocalTooLong,
                E::SubDomainEmpty | E::DomainInvalidSeparator => Flaw::DomainEmptyLabel,
                _ => Flaw::Shape,
            })
        })?;
        Ok(EmailAddress(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn domain(&self) -> &str {
        self.0.rsplit_once('@').map(|(_, d)| d).unwrap_or("")
    }

    pub fn local_part(&self) -> &str {
        self.0.rsplit_once('@').map(|(l, _)| l).unwrap_or("")
    }
}

/// The first flaw of a trimmed, lowercased string that the address parser would refuse
/// with a reason too vague to act on ("invalid").
fn flaw(s: &str) -> Option<Flaw> {
    if s.is_empty() {
        return Some(Flaw::Empty);
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(Flaw::Spaces);
    }
    let Some((local, domain)) = s.rsplit_once('@') else {
        return Some(Flaw::NoAt);
    };
    let quoted = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    if local.contains('@') && !quoted {
        return Some(Flaw::ManyAts);
    }
    if local.is_empty() {
        return Some(Flaw::EmptyLocal);
    }
    if domain.is_empty() {
        return Some(Flaw::EmptyDomain);
    }
    if !quoted && (local.starts_with('.') || local.ends_with('.') || local.contains("..")) {
        return Some(Flaw::LocalDots);
    }
    if domain.starts_with('[') {
        return Some(Flaw::AddressLiteral);
    }
    if !domain.contains('.') {
        return Some(Flaw::DomainNeedsDot);
    }
    if domain.split('.').any(str::is_empty) {
        return Some(Flaw::DomainEmptyLabel);
    }
    if domain
        .split('.')
        .any(|label| label.starts_with('-') || label.ends_with('-'))
    {
        return Some(Flaw::DomainHyphen);
    }
    None
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for EmailAddress {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// A request's address (JSON) is a field error with its code; a stored one (bincode,
/// not human-readable) that does not parse is damage, said as such, never a panic.
impl<'de> Deserialize<'de> for EmailAddress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let readable = d.is_human_readable();
        let s = String::deserialize(d)?;
        EmailAddress::parse(&s).map_err(|e| match readable {
            true => field_de_error(e.code(), e),
            false => stored_error(e),
        })
    }
}

pub(crate) fn stored_error<E: serde::de::Error>(e: EmailError) -> E {
    E::custom(format_args!("a stored address does not parse: {e}"))
}

/// bincode's own encoding, for a record that derives `bincode::Encode`: exactly the
/// bytes of the `String` it holds (as the serde form is), so a record whose field was
/// a `String` reads the same bytes.
impl bincode::Encode for EmailAddress {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        encoder: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        self.0.encode(encoder)
    }
}

impl<Context> bincode::Decode<Context> for EmailAddress {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        decoder: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        let s = String::decode(decoder)?;
        EmailAddress::parse(&s).map_err(|e| {
            bincode::error::DecodeError::OtherString(format!(
                "a stored address does not parse: {e}"
            ))
        })
    }
}

bincode::impl_borrow_decode!(EmailAddress);

/// What `parse` accepts, as a pattern the API's schema carries (the email format alone
/// lets `a@b` through, which has no domain to deliver to): a dot-atom local part of at
/// most 64 characters, and a domain of two or more LDH labels. Quoted local parts and
/// IDN domains are accepted too, beyond the pattern.
pub const EMAIL_PATTERN: &str = concat!(
    r"^\s*(?=[^@]{1,64}@)[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*",
    r"@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\s*$"
);

/// In the API's schema, an address is a string of the email format.
impl utoipa::PartialSchema for EmailAddress {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Email)))
            .pattern(Some(EMAIL_PATTERN))
            .max_length(Some(MAX_EMAIL_LEN))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for EmailAddress {}

#[cfg(test)]
mod tests {
    use super::*;

    fn standard() -> bincode::config::Configuration {
        bincode::config::standard()
    }

    #[test]
    fn an_address_is_stored_as_the_bytes_of_its_string_and_read_back_the_same() {
        let old = String::from("ada.lovelace+news@example.com");
        for written in [
            crate::codec::encode(&old).unwrap(),
            bincode::encode_to_vec(&old, standard()).unwrap(),
        ] {
            let read: EmailAddress = crate::codec::decode(&written).unwrap();
            assert_eq!(read.as_str(), old);
            let (native, _): (EmailAddress, usize) =
                bincode::decode_from_slice(&written, standard()).unwrap();
            assert_eq!(native, read);
            assert_eq!(crate::codec::encode(&read).unwrap(), written, "serde");
            assert_eq!(
                bincode::encode_to_vec(&read, standard()).unwrap(),
                written,
                "bincode's own"
            );
        }
    }

    #[test]
    fn a_stored_string_that_is_not_an_address_is_a_storage_error() {
        let written = crate::codec::encode(&String::from("not an address")).unwrap();
        let err = crate::codec::decode::<EmailAddress>(&written).unwrap_err();
        assert!(matches!(err, crate::Error::Storage(_)), "{err:?}");
        let said = crate::error::chain(&err);
        assert!(
            said.contains("a stored address does not parse: Invalid email"),
            "{said}"
        );
        let native = bincode::decode_from_slice::<EmailAddress, _>(&written, standard());
        assert!(native.is_err());
    }

    #[test]
    fn a_request_address_that_does_not_parse_is_still_a_field_error() {
        let err = serde_json::from_str::<EmailAddress>("\"ada\"").unwrap_err();
        assert!(err.to_string().starts_with("invalid_string"), "{err}");
    }

    #[test]
    fn parse_trims_and_lowercases() {
        let e = EmailAddress::parse("  Ada@Example.COM ").unwrap();
        assert_eq!(e.as_str(), "ada@example.com");
        assert_eq!(e.domain(), "example.com");
        assert_eq!(e.local_part(), "ada");
    }

    #[test]
    fn parse_refuses_what_is_not_an_address_and_says_why() {
        for (bad, why) in [
            ("", Flaw::Empty),
            ("ada", Flaw::NoAt),
            ("ada@", Flaw::EmptyDomain),
            ("@example.com", Flaw::EmptyLocal),
            ("ada@example", Flaw::DomainNeedsDot),
            ("a b@example.com", Flaw::Spaces),
            ("ada@-x.com", Flaw::DomainHyphen),
            ("a@b@example.com", Flaw::ManyAts),
            ("ada.@example.com", Flaw::LocalDots),
            ("ada@example..com", Flaw::DomainEmptyLabel),
            ("ada@[192.0.2.1]", Flaw::AddressLiteral),
            ("a,b@example.com", Flaw::Character),
        ] {
            assert_eq!(
                EmailAddress::parse(bad),
                Err(EmailError::Invalid(why)),
                "{bad}"
            );
        }
        assert_eq!(
            Flaw::DomainNeedsDot.to_string(),
            "the domain needs a dot (as in example.com)"
        );
        let long = format!("{}@example.com", "a".repeat(300));
        assert_eq!(EmailAddress::parse(&long), Err(EmailError::TooLong));
    }
}
