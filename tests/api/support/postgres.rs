//! The PostgreSQL pass of the API tests. With `MAILROOM_TEST_POSTGRES_URL` set (a role
//! that may create schemas; see `.ci/postgres.sh`), every server and CLI run stores its
//! pairs in PostgreSQL, in a schema named after its data directory: each test gets a
//! fresh one, and a restart or a CLI run on the same directory finds the same data.

use std::path::Path;
use std::process::Command;

/// The URL of the PostgreSQL pass, when this is one.
pub fn postgres_url() -> Option<String> {
    std::env::var("MAILROOM_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// On the PostgreSQL pass, the URL of the (new or existing) schema of `data_dir`.
pub fn schema_url(data_dir: &Path) -> Option<String> {
    schema_url_on(&postgres_url()?, data_dir)
}

/// The same schema reached over TCP with TLS (`.ci/postgres.sh` serves a certificate
/// its own CA signed), and that CA's file: (URL, CA file).
pub fn tls_schema_url(data_dir: &Path) -> Option<(String, String)> {
    let tls = std::env::var("MAILROOM_TEST_POSTGRES_TLS_URL").ok()?;
    let ca = std::env::var("MAILROOM_TEST_POSTGRES_CA").ok()?;
    schema_url(data_dir)?;
    Some((schema_url_on(&tls, data_dir)?, ca))
}

fn schema_url_on(base: &str, data_dir: &Path) -> Option<String> {
    let admin = postgres_url()?;
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data_dir.hash(&mut h);
    let schema = format!("api_{:016x}", h.finish());
    let made = Command::new("psql")
        .args(["-v", "ON_ERROR_STOP=1", "-qAt", "-d", &admin, "-c"])
        .arg(format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .output()
        .expect("run psql (PostgreSQL's client) to make the test's schema");
    assert!(
        made.status.success(),
        "creating schema {schema}: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let sep = if base.contains('?') { '&' } else { '?' };
    Some(format!("{base}{sep}options=-c%20search_path%3D{schema}"))
}

/// For a test that reads or writes the sled data directory itself (its files, a backup
/// restored into it): on the PostgreSQL run it says why it does not apply, and returns
/// true for the test to stop. docs/testing.md lists them.
pub fn skipped_on_postgres(why: &str) -> bool {
    if postgres_url().is_some() {
        mailroom_testkit::skipped(&format!("on PostgreSQL: {why}"));
        return true;
    }
    false
}

/// The store of a stopped server on `data_dir`, as the server opened it: sled there, or
/// its PostgreSQL schema on the PostgreSQL run.
pub fn open_store(data_dir: &Path) -> std::sync::Arc<dyn mailroom_actors::store::Store> {
    use mailroom_actors::store::{PostgresConfig, PostgresStore, SledStore};
    match schema_url(data_dir) {
        Some(url) => PostgresStore::open(&PostgresConfig {
            url,
            pool_size: 1,
            lock_wait_ms: 5_000,
            statement_timeout_ms: 5_000,
            partial: false,
            tls: Default::default(),
            ca_file: None,
        })
        .expect("open the stopped server's PostgreSQL store"),
        // A killed server's lock on the directory goes when the kernel has closed its
        // files, which can trail the kill by a moment on a busy machine: wait for it.
        None => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                match SledStore::open(data_dir, 8u64 << 20) {
                    Err(mailroom_actors::Error::Locked { .. })
                        if std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(50))
                    }
                    opened => break opened.expect("open the stopped server's store"),
                }
            }
        }
    }
}
