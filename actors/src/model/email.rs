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
    Invalid,
}

impl EmailAddress {
    /// Trims and lowercases, then checks the syntax that deliverable addresses use:
    /// a dot-atom or quoted local part, and a domain with at least one dot.
    pub fn parse(raw: &str) -> Result<Self, EmailError> {
        let s = raw.trim().to_lowercase();
        if s.len() > MAX_EMAIL_LEN {
            return Err(EmailError::TooLong);
        }
        let parsed = email_address::EmailAddress::from_str(&s).map_err(|_| EmailError::Invalid)?;
        let domain = parsed.domain();
        let domain_ok = domain.contains('.')
            && !domain.starts_with('[')
            && domain
                .split('.')
                .all(|label| !label.is_empty() && !label.starts_with('-') && !label.ends_with('-'));
        if !domain_ok || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(EmailError::Invalid);
        }
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

impl<'de> Deserialize<'de> for EmailAddress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        EmailAddress::parse(&s).map_err(|e| match e {
            EmailError::TooLong => field_de_error(
                FieldCode::TooBig,
                format_args!("Email must be at most {MAX_EMAIL_LEN} characters"),
            ),
            EmailError::Invalid => field_de_error(FieldCode::InvalidString, "Invalid email"),
        })
    }
}

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

    #[test]
    fn parse_trims_and_lowercases() {
        let e = EmailAddress::parse("  Ada@Example.COM ").unwrap();
        assert_eq!(e.as_str(), "ada@example.com");
        assert_eq!(e.domain(), "example.com");
        assert_eq!(e.local_part(), "ada");
    }

    #[test]
    fn parse_refuses_what_is_not_an_address() {
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
            "ada@-x.com",
        ] {
            assert_eq!(EmailAddress::parse(bad), Err(EmailError::Invalid), "{bad}");
        }
        let long = format!("{}@example.com", "a".repeat(300));
        assert_eq!(EmailAddress::parse(&long), Err(EmailError::TooLong));
    }
}
