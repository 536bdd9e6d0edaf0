//! Reading a stopped server's store directly, for what the API cannot show
//! (its sled directory, or its schema on the PostgreSQL pass).

/// Every key and value in the store that holds `needle`, read with the server stopped.
pub fn store_copies_of(data_dir: &std::path::Path, needle: &str) -> Vec<String> {
    let store = super::postgres::open_store(data_dir);
    let mut found = Vec::new();
    for kv in store.scan(b"", None, false) {
        let (k, v) = kv.expect("read the store");
        let has = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle.as_bytes());
        if has(&k) || has(&v) {
            found.push(String::from_utf8_lossy(&k).into_owned());
        }
    }
    found
}
