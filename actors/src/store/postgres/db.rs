//! The connection side of the PostgreSQL backend: a runtime of its own (the store is
//! called from actor threads and from inside other runtimes, which must never block on
//! a network round trip or nest a runtime), a pool that reconnects, and the session that
//! holds the store's lock.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::{pin_mut, TryStreamExt};
use imbl::OrdMap;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use super::schema;
use super::PostgresConfig;
use crate::error::{Error, Result};

/// Writes folded to their last value per key (None = deleted).
pub type Folded = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Shared bytes: a node of the map that a scan's clone still holds is copied when the
/// committer changes it, and copying these is a count, not an allocation.
pub type Bytes = std::sync::Arc<[u8]>;

/// The whole key space, as loaded at open.
pub type Map = OrdMap<Bytes, Bytes>;

/// One statement is one transaction: deletions and upserts of a group commit land
/// together or not at all, with one round trip and one WAL flush on the server. The
/// keys are folded, so no key is both deleted and written, nor written twice (which
/// ON CONFLICT DO UPDATE would refuse).
const COMMIT: &str = "WITH gone AS (DELETE FROM kv WHERE key = ANY($1::bytea[])) \
     INSERT INTO kv (key, value) SELECT * FROM unnest($2::bytea[], $3::bytea[]) \
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";

pub struct Db {
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    /// The session whose advisory lock keeps a second node off this key space until
    /// projects have owners of their own (leases); closed with the store.
    lock: Option<Client>,
    /// Where the store is, for messages (no password).
    pub place: String,
}

impl Db {
    /// Connects, takes the store's lock (waiting up to `lock_wait_ms` for a process
    /// that just died to release it), migrates the schema and loads every pair.
    pub fn open(config: &PostgresConfig) -> Result<(Db, Map)> {
        let pg: tokio_postgres::Config = config
            .url
            .parse()
            .map_err(|e| Error::storage_caused("storage.postgres.url is not a valid URL", e))?;
        let place = describe(&pg);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("store-postgres")
            .enable_all()
            .build()
            .map_err(|e| Error::storage_caused("starting the PostgreSQL runtime", e))?;
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .build()
            .map_err(|e| Error::storage_caused("building the PostgreSQL pool", e))?;
        let mut db = Db {
            runtime: Some(runtime),
            pool,
            lock: None,
            place,
        };
        let (pool, at, wait) = (
            db.pool.clone(),
            db.place.clone(),
            Duration::from_millis(config.lock_wait_ms),
        );
        let (lock, map) = db.run(async move {
            let lock = take_lock(&pg, &at, wait).await?;
            let client = pool.get().await.map_err(|e| connecting(&at, e))?;
            schema::migrate(&client).await?;
            let map = load(&client).await?;
            Ok::<_, Error>((lock, map))
        })??;
        db.lock = Some(lock);
        Ok((db, map))
    }

    /// Runs `fut` on the store's runtime and waits for it on this thread (any thread:
    /// nothing here needs a runtime of the caller's).
    pub fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime
            .as_ref()
            .ok_or_else(|| Error::storage("the PostgreSQL store is closed"))?
            .spawn(async move {
                let _ = tx.send(fut.await);
            });
        rx.recv()
            .map_err(|_| Error::storage("the PostgreSQL runtime stopped"))
    }

    /// Writes one group of writes in one transaction; hands the group back, so the
    /// caller applies it to its copy (or queues it again) without a copy of its values.
    pub fn commit(&self, group: Group) -> (Group, Result<()>) {
        let (pool, at) = (self.pool.clone(), self.place.clone());
        let sent = self.run(async move {
            let outcome = async {
                let client = pool.get().await.map_err(|e| connecting(&at, e))?;
                let statement = client.prepare_cached(COMMIT).await.map_err(failed)?;
                client
                    .execute(&statement, &[&group.gone, &group.keys, &group.values])
                    .await
                    .map_err(failed)?;
                Ok(())
            }
            .await;
            (group, outcome)
        });
        match sent {
            Ok(done) => done,
            // The runtime is gone (the store is closing): nothing was written.
            Err(e) => (Group::default(), Err(e)),
        }
    }
}

/// Writes folded to their last value per key, split by kind, each part in key order.
#[derive(Default)]
pub struct Group {
    pub gone: Vec<Vec<u8>>,
    pub keys: Vec<Vec<u8>>,
    pub values: Vec<Vec<u8>>,
}

impl From<Folded> for Group {
    fn from(folded: Folded) -> Self {
        let mut g = Group::default();
        for (k, v) in folded {
            match v {
                Some(v) => {
                    g.keys.push(k);
                    g.values.push(v);
                }
                None => g.gone.push(k),
            }
        }
        g
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.lock.take();
        if let Some(rt) = self.runtime.take() {
            // Not a blocking shutdown: the store may be dropped inside another runtime.
            rt.shutdown_background();
        }
    }
}

/// A session-level advisory lock keyed by the schema: a second process on the same
/// schema gets `Error::Locked`, as a second process on a sled directory does.
async fn take_lock(pg: &tokio_postgres::Config, at: &str, wait: Duration) -> Result<Client> {
    let (client, connection) = pg.connect(NoTls).await.map_err(|e| connecting(at, e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "the PostgreSQL lock session ended");
        }
    });
    let deadline = Instant::now() + wait;
    loop {
        let row = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))",
                &[&LOCK_CLASS],
            )
            .await
            .map_err(failed)?;
        if row.get::<_, bool>(0) {
            return Ok(client);
        }
        if Instant::now() >= deadline {
            return Err(Error::Locked {
                path: at.to_owned(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first key of the store's advisory lock ("mail"), so it cannot meet another
/// application's locks keyed by a single number.
const LOCK_CLASS: i32 = 0x6d61_696c;

/// Streams every pair in key order into the map.
async fn load(client: &Client) -> Result<Map> {
    let started = Instant::now();
    let rows = client
        .query_raw(
            "SELECT key, value FROM kv ORDER BY key",
            std::iter::empty::<&str>(),
        )
        .await
        .map_err(failed)?;
    pin_mut!(rows);
    let mut map = Map::new();
    while let Some(row) = rows.try_next().await.map_err(failed)? {
        map.insert(
            Bytes::from(row.get::<_, &[u8]>(0)),
            Bytes::from(row.get::<_, &[u8]>(1)),
        );
    }
    tracing::info!(
        pairs = map.len(),
        millis = started.elapsed().as_millis() as u64,
        "loaded the store from PostgreSQL"
    );
    Ok(map)
}

/// A failed statement; a full disk on the server says so, so that the edge answers 503.
pub fn failed(e: tokio_postgres::Error) -> Error {
    if e.code() == Some(&SqlState::DISK_FULL) {
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, e);
        return Error::storage_caused("PostgreSQL is out of disk space", full);
    }
    Error::storage_caused("a PostgreSQL statement failed", e)
}

fn connecting(at: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage_caused(format!("connecting to PostgreSQL at {at}"), e)
}

/// Host, port, user and database of the URL, without its password.
fn describe(pg: &tokio_postgres::Config) -> String {
    let host = pg
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".to_owned());
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgresql://{}@{host}:{port}/{}",
        pg.get_user().unwrap_or(""),
        pg.get_dbname().unwrap_or("")
    )
}
