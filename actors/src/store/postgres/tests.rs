//! Against a real PostgreSQL: the URL of a role that may create schemas comes from
//! `MAILROOM_TEST_POSTGRES_URL` (`.ci/postgres.sh start` makes a cluster and prints it).
//! Without it these tests say so and pass: `cargo test --workspace` runs them that way,
//! and .ci/run runs them again with a cluster.

use super::*;

/// A fresh schema of its own for each store, so tests do not see each other's keys.
async fn config() -> Option<PostgresConfig> {
    let Ok(admin) = std::env::var("MAILROOM_TEST_POSTGRES_URL") else {
        eprintln!("skipped: MAILROOM_TEST_POSTGRES_URL is not set");
        return None;
    };
    let schema = format!("unit_{}", uuid::Uuid::now_v7().simple());
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("connect to MAILROOM_TEST_POSTGRES_URL");
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    let sep = if admin.contains('?') { '&' } else { '?' };
    Some(PostgresConfig {
        url: format!("{admin}{sep}options=-c%20search_path%3D{schema}"),
        pool_size: 2,
        lock_wait_ms: 200,
    })
}

fn put(s: &PostgresStore, k: &str, v: &str) {
    let mut b = Batch::new();
    b.put(k.as_bytes(), v.as_bytes());
    s.apply(b).unwrap();
}

use crate::store::contract::keys;

#[tokio::test]
async fn durable_writes_and_deletions_are_there_after_a_reopen() {
    let Some(config) = config().await else { return };
    {
        let s = PostgresStore::open(&config).unwrap();
        put(&s, "k/1", "one");
        put(&s, "k/2", "two");
        s.durable().await.unwrap();
        let mut b = Batch::new();
        b.delete(b"k/1".to_vec());
        b.put(b"k/3".to_vec(), b"three".to_vec());
        s.apply(b).unwrap();
        s.durable().await.unwrap();
    }
    let s = PostgresStore::open(&config).unwrap();
    assert_eq!(keys(s.scan(b"k/", None, false)), ["k/2", "k/3"]);
    assert_eq!(s.get(b"k/3").unwrap(), Some(b"three".to_vec()));
    assert_eq!(
        s.get(keys::FORMAT_KEY).unwrap(),
        Some(keys::FORMAT.to_be_bytes().to_vec()),
        "a new store is marked with the key layout"
    );
}

#[tokio::test]
async fn a_write_never_made_durable_is_visible_but_not_in_postgres() {
    let Some(config) = config().await else { return };
    {
        let s = PostgresStore::open(&config).unwrap();
        put(&s, "k/kept", "v");
        s.durable().await.unwrap();
        put(&s, "k/lost", "v");
        assert_eq!(s.get(b"k/lost").unwrap(), Some(b"v".to_vec()));
    }
    let s = PostgresStore::open(&config).unwrap();
    assert_eq!(keys(s.scan(b"k/", None, false)), ["k/kept"]);
}

#[tokio::test]
async fn a_durable_scan_shows_values_once_committed_and_hides_deletions_at_once() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    crate::store::contract::a_durable_scan_shows_values_once_durable_and_hides_deletions_at_once(
        &*s,
    )
    .await;
}

#[tokio::test]
async fn scan_walks_a_prefix_both_ways_from_a_cursor_across_chunks() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let mut b = Batch::new();
    let n = CHUNK * 2 + 7;
    for i in 0..n {
        b.put(format!("a/{i:04}").into_bytes(), b"v".to_vec());
    }
    b.put(b"b/1".to_vec(), b"v".to_vec());
    s.apply(b).unwrap();
    s.durable().await.unwrap();
    // One more, not committed: the walk merges it in.
    put(&s, "a/0100x", "v");
    let fwd = keys(s.scan(b"a/", None, false));
    assert_eq!(fwd.len(), n + 1);
    assert!(fwd.windows(2).all(|w| w[0] < w[1]), "in key order");
    let rev = keys(s.scan(b"a/", None, true));
    assert_eq!(rev, fwd.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(
        keys(s.scan(b"a/", Some(b"a/0002"), true)),
        ["a/0001", "a/0000"]
    );
    let after = keys(s.scan(b"a/", Some(b"a/0100"), false));
    assert_eq!(after.first().map(String::as_str), Some("a/0100x"));
    assert_eq!(after.len(), n - 101 + 1);
}

#[tokio::test]
async fn a_snapshot_holds_one_moment_while_writes_go_on() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    for i in 0..600 {
        put(&s, &format!("s/{i:04}"), "old");
    }
    s.durable().await.unwrap();
    put(&s, "s/pending", "applied");
    let snap = s.snapshot().unwrap();
    for i in 0..600 {
        put(&s, &format!("s/{i:04}"), "new");
    }
    s.durable().await.unwrap();
    let pairs: Vec<KvPair> = snap.map(Result::unwrap).collect();
    let values: Vec<&[u8]> = pairs
        .iter()
        .filter(|(k, _)| k.starts_with(b"s/"))
        .map(|(_, v)| v.as_slice())
        .collect();
    assert_eq!(values.len(), 601);
    assert!(values[..600].iter().all(|v| *v == b"old"));
    assert_eq!(values[600], b"applied");
}

#[tokio::test]
async fn a_second_open_of_the_same_schema_is_refused_as_locked() {
    let Some(config) = config().await else { return };
    let _s = PostgresStore::open(&config).unwrap();
    match PostgresStore::open(&config) {
        Err(Error::Locked { path }) => assert!(!path.contains("password"), "{path}"),
        Err(other) => panic!("expected Locked, got {other:?}"),
        Ok(_) => panic!("expected Locked, got a second store"),
    }
}

#[tokio::test]
async fn concurrent_batches_share_commits() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let before = s.shared.transactions.load(Ordering::Relaxed);
    let waits: Vec<_> = (0..200)
        .map(|i| {
            put(&s, &format!("g/{i:03}"), "v");
            s.durable()
        })
        .collect();
    futures_util::future::try_join_all(waits).await.unwrap();
    let made = s.shared.transactions.load(Ordering::Relaxed) - before;
    assert!(
        (1..=10).contains(&made),
        "200 durable batches took {made} transactions"
    );
    drop(s);
    let s = PostgresStore::open(&config).unwrap();
    assert_eq!(s.scan(b"g/", None, false).count(), 200);
}

/// Durable single-put batches per second through the trait, one writer after another
/// and 64 at once, on PostgreSQL and on sled in the same run (docs/performance.md).
#[tokio::test]
#[ignore = "a measurement: cargo test -p mailroom-actors commit_rate -- --ignored --nocapture"]
async fn commit_rate_of_small_durable_batches() {
    let Some(config) = config().await else { return };
    let pg = PostgresStore::open(&config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sled = crate::store::SledStore::open(dir.path(), 64 << 20).unwrap();
    for (name, store) in [
        ("postgres", pg as Arc<dyn Store>),
        ("sled", sled as Arc<dyn Store>),
    ] {
        let started = std::time::Instant::now();
        for i in 0..300u32 {
            let mut b = Batch::new();
            b.put(format!("seq/{i:06}").into_bytes(), vec![7u8; 100]);
            store.apply(b).unwrap();
            store.durable().await.unwrap();
        }
        let one = 300.0 / started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        let writers: Vec<_> = (0..64u32)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..100u32 {
                        let mut b = Batch::new();
                        b.put(format!("par/{w:02}/{i:04}").into_bytes(), vec![7u8; 100]);
                        store.apply(b).unwrap();
                        store.durable().await.unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let many = 6400.0 / started.elapsed().as_secs_f64();
        println!("{name}: {one:.0} durable batches/s one at a time, {many:.0}/s from 64 writers");
    }
}

#[tokio::test]
async fn the_schema_is_migrated_once_and_a_newer_one_is_refused() {
    let Some(config) = config().await else { return };
    drop(PostgresStore::open(&config).unwrap());
    drop(PostgresStore::open(&config).unwrap());
    let (client, connection) = tokio_postgres::connect(&config.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let versions: Vec<i32> = client
        .query("SELECT version FROM mailroom_schema", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        versions,
        [SCHEMA_VERSION],
        "one row, at this build's version"
    );
    client
        .execute("UPDATE mailroom_schema SET version = version + 1", &[])
        .await
        .unwrap();
    match PostgresStore::open(&config) {
        Err(e) => assert!(e.to_string().contains("newer Mailroom"), "{e}"),
        Ok(_) => panic!("a schema of a newer version was opened"),
    }
}
