//! Unknown request fields. Plunk's clients send a few fields that the specification does
//! not list, so an unknown field is ignored; but a field that is a near miss of a known
//! one (`subscibed`, `audiencetype`, `segmentID`) is a typo whose value would otherwise
//! vanish without a word, so it is refused with the field it probably meant.

use crate::{FieldCode, FieldError};
use strsim::osa_distance;

/// The known field that `unknown` is a near miss of: the same letters in another case,
/// or at most two edits away (one for short names, none for names of two letters, where
/// one edit already makes another common word).
pub fn meant<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    if known.contains(&unknown) {
        return None;
    }
    if let Some(k) = known.iter().find(|k| k.eq_ignore_ascii_case(unknown)) {
        return Some(k);
    }
    let lower = unknown.to_lowercase();
    let len = lower.chars().count();
    known
        .iter()
        .filter_map(|k| {
            // The distance is at least the difference in length: a long key (a hostile
            // body may hold thousands) costs nothing.
            let known_len = k.chars().count();
            if len.abs_diff(known_len) > 2 {
                return None;
            }
            let shorter = known_len.min(len);
            let allowed = match shorter {
                0..=2 => 0,
                3..=4 => 1,
                _ => 2,
            };
            let d = osa_distance(&lower, &k.to_lowercase());
            (d <= allowed).then_some((d, *k))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The most near misses one answer names (a 422 lists at most 100 errors anyway).
const MAX_REPORTED: usize = 100;

/// A 422 item for each of `keys` that is a near miss of one of `known`, each key once.
pub fn errors<'k>(keys: impl IntoIterator<Item = &'k String>, known: &[&str]) -> Vec<FieldError> {
    let mut seen = std::collections::HashSet::new();
    keys.into_iter()
        .filter(|key| seen.insert(key.as_str()))
        .filter_map(|key| {
            let k = meant(key, known)?;
            Some(FieldError::new(
                key.clone(),
                FieldCode::UnrecognizedKeys,
                format!("unknown field `{key}`; did you mean `{k}`?"),
            ))
        })
        .take(MAX_REPORTED)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::meant;

    const CONTACT: &[&str] = &["email", "subscribed", "data"];
    const CAMPAIGN: &[&str] = &[
        "name",
        "audienceType",
        "type",
        "segmentId",
        "audienceFilter",
    ];
    const SEND: &[&str] = &["to", "from", "name", "reply", "data", "type", "body"];

    #[test]
    fn a_typo_or_another_case_is_a_near_miss() {
        assert_eq!(meant("subscibed", CONTACT), Some("subscribed"));
        assert_eq!(meant("Data", CONTACT), Some("data"));
        assert_eq!(meant("audiencetype", CAMPAIGN), Some("audienceType"));
        assert_eq!(meant("segmentID", CAMPAIGN), Some("segmentId"));
        assert_eq!(meant("audienceTyp", CAMPAIGN), Some("audienceType"));
        assert_eq!(meant("emial", CONTACT), Some("email"));
    }

    #[test]
    fn known_and_distant_fields_are_not_near_misses() {
        assert_eq!(meant("email", CONTACT), None);
        assert_eq!(meant("firstName", CONTACT), None);
        assert_eq!(
            meant("id", SEND),
            None,
            "two letters: one edit is another word"
        );
        assert_eq!(meant("cc", SEND), None);
        assert_eq!(meant("text", SEND), None);
        assert_eq!(meant("html", SEND), None);
        assert_eq!(meant("tags", CONTACT), None);
    }
}
