//! Checks of the `Store` contract that every backend must pass, called from each
//! backend's own tests with a store of its kind.

use super::{Batch, KvIter, Store};

/// The keys of a scan, as text.
pub fn keys(it: KvIter<'_>) -> Vec<String> {
    it.map(|r| String::from_utf8(r.unwrap().0).unwrap())
        .collect()
}

/// `scan_durable` shows a value once it is durable (and not before), and hides a
/// deletion at once. `s` must hold nothing under `o/`.
pub async fn a_durable_scan_shows_values_once_durable_and_hides_deletions_at_once(s: &dyn Store) {
    let put = |k: &str| {
        let mut b = Batch::new();
        b.put(k.as_bytes(), b"v".to_vec());
        s.apply(b).unwrap();
    };
    put("o/1");
    s.durable().await.unwrap();
    put("o/2");
    assert_eq!(keys(s.scan(b"o/", None, false)), ["o/1", "o/2"]);
    assert_eq!(
        keys(s.scan_durable(b"o/", None)),
        ["o/1"],
        "o/2 is not durable yet"
    );
    let mut b = Batch::new();
    b.delete(b"o/1".to_vec());
    s.apply(b).unwrap();
    assert!(
        keys(s.scan_durable(b"o/", None)).is_empty(),
        "a deletion hides at once"
    );
    s.durable().await.unwrap();
    assert_eq!(keys(s.scan_durable(b"o/", None)), ["o/2"]);
}
