//! Domain names as DNS and SMTP use them: IDN labels become punycode (UTS 46), and
//! the result is lowercase LDH labels of 1 to 63 octets, at most 253 octets in all,
//! with at least two labels and a top-level label that is not all digits.

use std::fmt;

pub const MAX_DOMAIN_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    NotIdna,
    TooLong,
    EmptyLabel,
    LabelTooLong,
    BadCharacter,
    HyphenAtEdge,
    SingleLabel,
    NumericTld,
}

impl NameProblem {
    pub fn message(self) -> &'static str {
        match self {
            NameProblem::Empty => "The domain is empty",
            NameProblem::NotIdna => "The domain is not a valid internationalized domain name",
            NameProblem::TooLong => "The domain is longer than 253 characters",
            NameProblem::EmptyLabel => "The domain has an empty label (two dots in a row)",
            NameProblem::LabelTooLong => "A label of the domain is longer than 63 characters",
            NameProblem::BadCharacter => {
                "The domain may contain only letters, digits, hyphens and dots"
            }
            NameProblem::HyphenAtEdge => "A label of the domain starts or ends with a hyphen",
            NameProblem::SingleLabel => "The domain has no top-level domain",
            NameProblem::NumericTld => {
                "The top-level domain is numeric (an IP address is not a domain)"
            }
        }
    }
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// The ASCII (punycode) form of a domain, lowercased, without a trailing dot.
pub fn to_ascii(raw: &str) -> Result<String, NameProblem> {
    let s = raw.trim();
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() {
        return Err(NameProblem::Empty);
    }
    let ascii = if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        idna::domain_to_ascii(s).map_err(|_| NameProblem::NotIdna)?
    };
    check_ascii(&ascii)?;
    Ok(ascii)
}

fn check_ascii(d: &str) -> Result<(), NameProblem> {
    if d.len() > MAX_DOMAIN_LEN {
        return Err(NameProblem::TooLong);
    }
    let mut labels = 0;
    let mut last = "";
    for label in d.split('.') {
        if label.is_empty() {
            return Err(NameProblem::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(NameProblem::LabelTooLong);
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(NameProblem::BadCharacter);
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(NameProblem::HyphenAtEdge);
        }
        labels += 1;
        last = label;
    }
    if labels < 2 {
        return Err(NameProblem::SingleLabel);
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NameProblem::NumericTld);
    }
    Ok(())
}

/// A domain known to be valid, in its ASCII form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DomainName(String);

impl DomainName {
    pub fn parse(raw: &str) -> Result<Self, NameProblem> {
        to_ascii(raw).map(DomainName)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for DomainName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::FieldCode;
        let raw = String::deserialize(d)?;
        // Past this, the input is not a domain even before punycode.
        if raw.chars().count() > MAX_DOMAIN_LEN {
            return Err(crate::error::field_de_error(
                FieldCode::TooBig,
                NameProblem::TooLong,
            ));
        }
        DomainName::parse(&raw).map_err(|p| {
            let code = match p {
                NameProblem::Empty => FieldCode::TooSmall,
                NameProblem::TooLong => FieldCode::TooBig,
                _ => FieldCode::InvalidString,
            };
            crate::error::field_de_error(code, p)
        })
    }
}

/// The ASCII form in the schema; IDN names are accepted too, and stored as punycode.
impl utoipa::PartialSchema for DomainName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        const LABEL: &str = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A domain name such as example.com: two labels or more, the last not all \
                 digits. IDN names are accepted and stored as punycode.",
            ))
            .pattern(Some(format!(
                r"^\s*({LABEL}\.)+(?![0-9]+\.?\s*$){LABEL}\.?\s*$"
            )))
            .max_length(Some(MAX_DOMAIN_LEN))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for DomainName {}

/// `a.b.example.com`, then `b.example.com`, then `example.com`: the name and each
/// parent that still has two labels. Allocation free.
pub fn self_and_parents(domain: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(domain);
    std::iter::from_fn(move || {
        let current = rest?;
        rest = current
            .split_once('.')
            .map(|(_, parent)| parent)
            .filter(|p| p.contains('.'));
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercased_and_idn_becomes_punycode() {
        assert_eq!(to_ascii(" Example.COM. ").unwrap(), "example.com");
        assert_eq!(to_ascii("bücher.example").unwrap(), "xn--bcher-kva.example");
        assert_eq!(to_ascii("例子.测试").unwrap(), "xn--fsqu00a.xn--0zwm56d");
    }

    #[test]
    fn invalid_names_say_why() {
        assert_eq!(to_ascii(""), Err(NameProblem::Empty));
        assert_eq!(to_ascii("localhost"), Err(NameProblem::SingleLabel));
        assert_eq!(to_ascii("a..com"), Err(NameProblem::EmptyLabel));
        assert_eq!(to_ascii("-a.com"), Err(NameProblem::HyphenAtEdge));
        assert_eq!(to_ascii("a_b.com"), Err(NameProblem::BadCharacter));
        assert_eq!(to_ascii("https://a.com"), Err(NameProblem::BadCharacter));
        assert_eq!(to_ascii("10.0.0.1"), Err(NameProblem::NumericTld));
        assert_eq!(
            to_ascii(&format!("{}.com", "a".repeat(64))),
            Err(NameProblem::LabelTooLong)
        );
        let long = format!("{}com", "abcdefghi.".repeat(26));
        assert_eq!(to_ascii(&long), Err(NameProblem::TooLong));
    }

    #[test]
    fn parents_stop_at_two_labels() {
        let all: Vec<_> = self_and_parents("a.b.example.com").collect();
        assert_eq!(all, ["a.b.example.com", "b.example.com", "example.com"]);
        assert_eq!(self_and_parents("example.com").count(), 1);
    }
}
