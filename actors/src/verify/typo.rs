//! Typo suggestions for the domain of an address: `gmial.com` -> `gmail.com`,
//! `gmail.con` -> `gmail.com`, `acme.con` -> `acme.com`.
//!
//! Two rules, in order:
//! 1. Top-level slips. A slip that is not a real TLD (`.con`, `.cpm`, `.comm`) is fixed
//!    on any domain. A slip that is a real TLD (`.cm` is Cameroon, `.co` Colombia) is
//!    fixed only when that turns the domain into a well-known one (`gmail.cm`).
//! 2. Edit distance (optimal string alignment: substitutions, insertions, deletions and
//!    swaps of neighbours) against well-known provider domains. Providers with short
//!    names are left out (`live.com` is one letter from `love.com`, a real domain), and
//!    a domain with the same name under another TLD (`hotmail.ca`) is not a typo.
//!
//! No allocation unless there is a suggestion.

/// Popular mailbox domains, most popular first (ties go to the earlier one).
const WELL_KNOWN: &[&str] = &[
    "gmail.com",
    "yahoo.com",
    "hotmail.com",
    "outlook.com",
    "icloud.com",
    "aol.com",
    "live.com",
    "msn.com",
    "me.com",
    "mac.com",
    "googlemail.com",
    "protonmail.com",
    "proton.me",
    "ymail.com",
    "rocketmail.com",
    "mail.com",
    "email.com",
    "gmx.com",
    "gmx.de",
    "gmx.net",
    "web.de",
    "yandex.ru",
    "yandex.com",
    "mail.ru",
    "zoho.com",
    "fastmail.com",
    "comcast.net",
    "verizon.net",
    "att.net",
    "sbcglobal.net",
    "bellsouth.net",
    "hotmail.co.uk",
    "yahoo.co.uk",
    "hotmail.fr",
    "yahoo.fr",
    "orange.fr",
    "free.fr",
    "wanadoo.fr",
    "btinternet.com",
    "qq.com",
    "163.com",
    "126.com",
    "naver.com",
    "hey.com",
    "tutanota.com",
    "libero.it",
    "t-online.de",
];

/// (slip, intended, whether the slip is not a real TLD and can be fixed anywhere)
const TLD_SLIPS: &[(&str, &str, bool)] = &[
    ("con", "com", true),
    ("cpm", "com", true),
    ("comm", "com", true),
    ("coom", "com", true),
    ("cmo", "com", true),
    ("ocm", "com", true),
    ("cim", "com", true),
    ("vom", "com", true),
    ("xom", "com", true),
    ("comn", "com", true),
    ("conm", "com", true),
    ("copm", "com", true),
    ("colm", "com", true),
    ("clm", "com", true),
    ("ckm", "com", true),
    ("c0m", "com", true),
    ("cok", "com", true),
    ("cm", "com", false),
    ("co", "com", false),
    ("om", "com", false),
    ("nte", "net", true),
    ("nett", "net", true),
    ("ner", "net", true),
    ("ogr", "org", true),
    ("orgg", "org", true),
    ("prg", "org", true),
];

/// Names shorter than this get no edit-distance matching (too many real neighbours).
const MIN_FUZZY_NAME: usize = 5;
const LONGEST: usize = 64;

/// The domain the user probably meant, if `domain` (ASCII, lowercase) looks like a slip.
pub fn suggest(domain: &str) -> Option<String> {
    if WELL_KNOWN.contains(&domain) || super::lists::is_personal(domain) {
        return None;
    }
    let (name, tld) = domain.split_once('.')?;
    let mut fixed_tld: Option<String> = None;
    if let Some((_, intended, anywhere)) = TLD_SLIPS.iter().find(|(slip, _, _)| *slip == tld) {
        let fixed = format!("{name}.{intended}");
        if WELL_KNOWN.contains(&fixed.as_str()) {
            return Some(fixed);
        }
        if *anywhere {
            fixed_tld = Some(fixed);
        }
    }
    let candidate = fixed_tld.as_deref().unwrap_or(domain);
    nearest_well_known(candidate)
        .map(str::to_owned)
        .or(fixed_tld)
}

fn nearest_well_known(domain: &str) -> Option<&'static str> {
    if domain.len() > LONGEST {
        return None;
    }
    let name = domain.split('.').next().unwrap_or(domain);
    let mut best: Option<(usize, &'static str)> = None;
    for known in WELL_KNOWN {
        let known_name = known.split('.').next().unwrap_or(known);
        let limit = match known_name.len() {
            n if n < MIN_FUZZY_NAME => continue,
            n if n < 7 => 1,
            _ => 2,
        };
        if known_name == name || domain.len().abs_diff(known.len()) > limit {
            continue;
        }
        let d = osa_distance(domain.as_bytes(), known.as_bytes());
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, known));
        }
    }
    best.map(|(_, known)| known)
}

/// Optimal string alignment distance, on the stack (both inputs at most 64 bytes).
fn osa_distance(a: &[u8], b: &[u8]) -> usize {
    let (n, m) = (a.len(), b.len());
    if n > LONGEST || m > LONGEST {
        return usize::MAX;
    }
    let mut two_back = [0usize; LONGEST + 1];
    let mut prev = [0usize; LONGEST + 1];
    let mut cur = [0usize; LONGEST + 1];
    for (j, cell) in prev.iter_mut().enumerate().take(m + 1) {
        *cell = j;
    }
    for i in 1..=n {
        cur[0] = i;
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(two_back[j - 2] + 1);
            }
            cur[j] = v;
        }
        two_back = prev;
        prev = cur;
    }
    prev[m]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osa_counts_a_swap_as_one_edit() {
        assert_eq!(osa_distance(b"gmial.com", b"gmail.com"), 1);
        assert_eq!(osa_distance(b"gmail.com", b"gmail.com"), 0);
        assert_eq!(osa_distance(b"hotmai.co", b"hotmail.com"), 2);
        assert_eq!(osa_distance(b"", b"abc"), 3);
        assert_eq!(osa_distance(b"abc", b""), 3);
        assert_eq!(osa_distance(b"ca", b"abc"), 3, "OSA, not full Damerau");
    }

    #[test]
    fn near_misses_of_well_known_domains_are_suggested() {
        for (typo, meant) in [
            ("gmial.com", "gmail.com"),
            ("gmai.com", "gmail.com"),
            ("gamil.com", "gmail.com"),
            ("gmaill.com", "gmail.com"),
            ("hotmial.com", "hotmail.com"),
            ("hotmal.com", "hotmail.com"),
            ("yahooo.com", "yahoo.com"),
            ("outlok.com", "outlook.com"),
            ("iclod.com", "icloud.com"),
            ("protonmial.com", "protonmail.com"),
        ] {
            assert_eq!(suggest(typo).as_deref(), Some(meant), "{typo}");
        }
    }

    #[test]
    fn tld_slips_are_fixed() {
        for (typo, meant) in [
            ("gmail.con", "gmail.com"),
            ("gmail.cm", "gmail.com"),
            ("gmail.comm", "gmail.com"),
            ("gmail.cpm", "gmail.com"),
            ("yahoo.co", "yahoo.com"),
            ("aol.con", "aol.com"),
            ("acme.con", "acme.com"),
            ("gmial.con", "gmail.com"),
            ("example.ogr", "example.org"),
        ] {
            assert_eq!(suggest(typo).as_deref(), Some(meant), "{typo}");
        }
    }

    #[test]
    fn real_domains_are_left_alone() {
        for ok in [
            "gmail.com",
            "mail.com",
            "email.com",
            "ymail.com",
            "hotmail.ca",
            "live.ca",
            "love.com",
            "acme.cm",
            "company.co",
            "example.com",
            "me.com",
            "mx.com",
        ] {
            assert_eq!(suggest(ok), None, "{ok}");
        }
    }
}
