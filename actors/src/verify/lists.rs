//! The domain lists behind isPersonalEmail, isAlias and isDisposable. Each is a
//! HashSet built once (the first use, or `warm()` at startup) and never written again,
//! so a lookup is a hash of a borrowed string.
//!
//! - Disposable: the `mailchecker` crate (FGRibreau/mailchecker, about 56,000 domains,
//!   maintained upstream). Updating it is `cargo update -p mailchecker` (or a bump of
//!   its major version in actors/Cargo.toml).
//! - Personal providers and alias services: the files in `actors/lists/`, which name
//!   their source and date.

use std::collections::HashSet;
use std::sync::LazyLock;

use crate::dns::name::self_and_parents;

const PERSONAL: &str = include_str!("../../lists/personal_domains.txt");
const ALIAS: &str = include_str!("../../lists/alias_domains.txt");

struct Lists {
    personal: HashSet<&'static str>,
    alias: HashSet<&'static str>,
    disposable: HashSet<&'static str>,
}

static LISTS: LazyLock<Lists> = LazyLock::new(|| {
    let alias = parse(ALIAS);
    let personal = parse(PERSONAL);
    let disposable = mailchecker::blacklist()
        .into_iter()
        .filter(|d| !alias.contains(d) && !personal.contains(d))
        .collect();
    Lists {
        personal,
        alias,
        disposable,
    }
});

fn parse(text: &'static str) -> HashSet<&'static str> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Builds the sets now, so that the first request does not pay for it.
pub fn warm() {
    LazyLock::force(&LISTS);
}

/// A free or personal mailbox provider (exact domain).
pub fn is_personal(ascii_domain: &str) -> bool {
    LISTS.personal.contains(ascii_domain)
}

/// An alias or forwarding service, the domain or a parent.
pub fn is_alias(ascii_domain: &str) -> bool {
    self_and_parents(ascii_domain).any(|d| LISTS.alias.contains(d))
}

/// A disposable-mail domain, the domain or a parent (`x.mailinator.com`).
pub fn is_disposable(ascii_domain: &str) -> bool {
    self_and_parents(ascii_domain).any(|d| LISTS.disposable.contains(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposable_domains_and_their_subdomains_are_found() {
        assert!(is_disposable("mailinator.com"));
        assert!(is_disposable("x.mailinator.com"));
        assert!(is_disposable("a.b.yopmail.com"));
        assert!(!is_disposable("gmail.com"));
        assert!(!is_disposable("example.org"));
        assert!(
            LISTS.disposable.len() > 10_000,
            "the upstream list is loaded"
        );
    }

    #[test]
    fn alias_services_are_aliases_and_not_disposable() {
        for d in [
            "privaterelay.appleid.com",
            "mozmail.com",
            "duck.com",
            "passmail.net",
            "simplelogin.com",
        ] {
            assert!(is_alias(d), "{d}");
            assert!(!is_disposable(d), "{d} is an alias, not disposable");
        }
        assert!(is_alias("alice.anonaddy.com"), "parents count");
        assert!(!is_alias("gmail.com"));
    }

    #[test]
    fn personal_providers_match_exactly() {
        assert!(is_personal("gmail.com"));
        assert!(is_personal("yahoo.co.uk"));
        assert!(!is_personal("mail.gmail.com"));
        assert!(!is_personal("acme.com"));
    }

    #[test]
    fn the_lists_do_not_overlap() {
        for d in &LISTS.personal {
            assert!(!LISTS.alias.contains(d), "{d} is personal and alias");
            assert!(
                !LISTS.disposable.contains(d),
                "{d} is personal and disposable"
            );
        }
        for d in LISTS.personal.iter().chain(&LISTS.alias) {
            assert_eq!(*d, d.trim().to_ascii_lowercase(), "entries are lowercase");
        }
    }
}
