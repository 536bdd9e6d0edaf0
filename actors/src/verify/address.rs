//! Address syntax for verification, as deliverable addresses use it: RFC 5321's
//! Dot-string or Quoted-string local part of at most 64 octets (with RFC 6531's UTF-8
//! allowed), `@`, and a domain that DNS can resolve (IDN labels through punycode), at
//! most 254 octets in all. Address literals (`[192.0.2.1]`) are refused: no public
//! mailbox is reached that way.
//!
//! Two kinds of failure: a string that is not shaped like an address at all (no `@`,
//! nothing on one side of it, spaces, control characters) is `NotAnAddress` and the
//! edge answers 422; an address-shaped string with a bad part is parsed, and each
//! problem becomes a reason in the result (which is then not `valid`).

use crate::dns::name::to_ascii;

const MAX_LOCAL_LEN: usize = 64;
const MAX_ADDRESS_LEN: usize = 254;
/// Longer input is not an address by any reading.
const MAX_INPUT_LEN: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnAddress;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// Trimmed, with the domain lowercased; the local part keeps its case.
    pub normalized: String,
    pub local: String,
    /// The ASCII (punycode) domain, when the domain is valid.
    pub ascii_domain: Option<String>,
    /// Syntax findings, in words; empty when the syntax is good.
    pub problems: Vec<&'static str>,
}

impl Address {
    pub fn syntax_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// `user+tag`: a non-empty tag after a non-empty base.
    pub fn is_plus_addressed(&self) -> bool {
        !self.local.starts_with('"')
            && self
                .local
                .split_once('+')
                .is_some_and(|(base, tag)| !base.is_empty() && !tag.is_empty())
    }
}

pub fn parse(raw: &str) -> Result<Address, NotAnAddress> {
    let s = raw.trim();
    if s.chars().count() > MAX_INPUT_LEN || s.chars().any(char::is_control) {
        return Err(NotAnAddress);
    }
    let (local, domain) = s.rsplit_once('@').ok_or(NotAnAddress)?;
    let quoted = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    if local.is_empty()
        || domain.is_empty()
        || domain.chars().any(char::is_whitespace)
        || (!quoted && local.chars().any(char::is_whitespace))
    {
        return Err(NotAnAddress);
    }
    let mut problems = Vec::new();
    if quoted {
        check_quoted(&local[1..local.len() - 1], &mut problems);
    } else {
        check_dot_string(local, &mut problems);
    }
    if local.len() > MAX_LOCAL_LEN {
        problems.push("The local part is longer than 64 characters");
    }
    let domain_lower = domain.to_lowercase();
    let ascii_domain = if domain.starts_with('[') {
        problems.push("Address literals such as [192.0.2.1] are not accepted");
        None
    } else {
        match to_ascii(&domain_lower) {
            Ok(d) if domain_lower.ends_with('.') => {
                problems.push("The domain ends with a dot");
                Some(d)
            }
            Ok(d) => Some(d),
            Err(p) => {
                problems.push(p.message());
                None
            }
        }
    };
    if let Some(d) = &ascii_domain {
        if local.len() + 1 + d.len() > MAX_ADDRESS_LEN {
            problems.push("The address is longer than 254 characters");
        }
    }
    Ok(Address {
        normalized: format!("{local}@{domain_lower}"),
        local: local.to_owned(),
        ascii_domain,
        problems,
    })
}

/// RFC 5321 atext, plus any non-ASCII character (RFC 6531).
fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c) || !c.is_ascii()
}

fn check_dot_string(local: &str, problems: &mut Vec<&'static str>) {
    if local.split('.').any(str::is_empty) {
        problems.push("The local part starts or ends with a dot, or has two dots in a row");
    }
    if !local.chars().all(|c| c == '.' || is_atext(c)) {
        problems.push("The local part contains characters that are not allowed without quotes");
    }
}

/// qtextSMTP (printable ASCII but `"` and `\`) or quoted-pairSMTP (`\` and a printable).
fn check_quoted(inner: &str, problems: &mut Vec<&'static str>) {
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        let ok = match c {
            '\\' => chars.next().is_some_and(|n| (' '..='~').contains(&n)),
            '"' => false,
            c => (' '..='~').contains(&c) || !c.is_ascii(),
        };
        if !ok {
            problems.push("The quoted local part is not valid");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Address {
        let a = parse(s).unwrap_or_else(|_| panic!("{s} is an address"));
        assert!(a.syntax_ok(), "{s}: {:?}", a.problems);
        a
    }

    fn bad(s: &str) -> Vec<&'static str> {
        let a = parse(s).unwrap_or_else(|_| panic!("{s} is address-shaped"));
        assert!(!a.syntax_ok(), "{s} should have a syntax problem");
        a.problems
    }

    #[test]
    fn ordinary_addresses_parse() {
        let a = ok("  Ada.Lovelace+news@Example.COM ");
        assert_eq!(a.normalized, "Ada.Lovelace+news@example.com");
        assert_eq!(a.ascii_domain.as_deref(), Some("example.com"));
        assert!(a.is_plus_addressed());
        ok("o'brien@example.ie");
        ok("x@a.co");
        ok("\"john doe\"@example.com");
        assert!(!ok("ada@example.com").is_plus_addressed());
        assert!(!ok("+tag@example.com").is_plus_addressed());
    }

    #[test]
    fn idn_domains_become_punycode_and_utf8_local_parts_are_allowed() {
        let a = ok("ada@Bücher.example");
        assert_eq!(a.normalized, "ada@bücher.example");
        assert_eq!(a.ascii_domain.as_deref(), Some("xn--bcher-kva.example"));
        ok("用户@例子.测试");
    }

    #[test]
    fn strings_that_are_not_addresses_are_refused() {
        for s in [
            "",
            "hello",
            "hello world",
            "@example.com",
            "ada@",
            "a b@example.com",
            "ada@exa mple.com",
            "ada\n@example.com",
        ] {
            assert_eq!(parse(s), Err(NotAnAddress), "{s:?}");
        }
    }

    #[test]
    fn address_shaped_strings_with_bad_parts_say_why() {
        assert!(bad("a..b@example.com")[0].contains("two dots"));
        assert!(bad(".a@example.com")[0].contains("dot"));
        assert!(bad("a(b)@example.com")[0].contains("not allowed"));
        assert!(bad("a@b@example.com")[0].contains("not allowed"));
        assert!(bad(&format!("{}@example.com", "a".repeat(65)))[0].contains("64"));
        assert!(bad("ada@localhost")[0].contains("top-level"));
        assert!(bad("ada@[192.0.2.1]")[0].contains("literal"));
        assert!(bad("ada@exa_mple.com")[0].contains("letters, digits"));
        let long = format!(
            "{}@{}.com",
            "a".repeat(64),
            "b".repeat(60) + &".c".repeat(70)
        );
        assert!(bad(&long).iter().any(|p| p.contains("254")));
    }
}
