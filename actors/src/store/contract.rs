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

/// `scan_durable_in_order` never shows a key after one whose latest write is not
/// durable: that key's durable value is unknown (an earlier write, or none), and a
/// reader keeping a cursor would pass its entries unseen (the webhook deliverer did,
/// with the event log's head block rewritten after a new block began). `s` must hold
/// nothing under `r/`.
pub async fn an_in_order_durable_scan_stops_at_a_key_rewritten_since(s: &dyn Store) {
    let put = |k: &str, v: &str| {
        let mut b = Batch::new();
        b.put(k.as_bytes(), v.as_bytes().to_vec());
        s.apply(b).unwrap();
    };
    put("r/a", "1");
    put("r/b", "1");
    s.durable().await.unwrap();
    put("r/a", "12");
    s.durable().await.unwrap();
    put("r/a", "123");
    let seen: Vec<(String, String)> = s
        .scan_durable_in_order(b"r/", None)
        .map(|r| {
            let (k, v) = r.unwrap();
            (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
        })
        .collect();
    assert!(
        seen.iter().all(|(k, v)| k == "r/a" && v != "123"),
        "only r/a's older durable value, and nothing after it: {seen:?}"
    );
    s.durable().await.unwrap();
    assert_eq!(keys(s.scan_durable_in_order(b"r/", None)), ["r/a", "r/b"]);
}

/// `scan_durable` hides a key whose latest write is not durable, rather than showing an
/// older copy: the workflow feeder took a copy from before a deletion for a step ready
/// to run. `s` must hold nothing under `h/`.
pub async fn a_durable_scan_hides_a_key_rewritten_since(s: &dyn Store) {
    let put = |v: &str| {
        let mut b = Batch::new();
        b.put(b"h/k".to_vec(), v.as_bytes().to_vec());
        s.apply(b).unwrap();
    };
    put("1");
    s.durable().await.unwrap();
    put("2");
    assert!(keys(s.scan_durable(b"h/", None)).is_empty());
    s.durable().await.unwrap();
    assert_eq!(keys(s.scan_durable(b"h/", None)), ["h/k"]);
}
