//! The connection side of the PostgreSQL backend: a runtime of its own (the store is
//! called from actor threads and from inside other runtimes, which must never block on
//! a network round trip or nest a runtime), a pool that reconnects, the commit
//! statement with its fence check, and the reads that fill a node's view.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures_util::{pin_mut, TryStreamExt};
use imbl::OrdMap;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls};

use super::schema;
use super::PostgresConfig;
use crate::error::{Error, Result};
use crate::id::{KeyId, ProjectId};
use crate::store::keys;

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
///
/// Fencing rides in the same statement: `held` locks (FOR SHARE) the lease of each
/// project the group writes under the epoch this node holds, and the writes happen
/// only when every one of them is still there. A takeover (`try_acquire`'s UPDATE)
/// waits for this transaction, or this one waits for it and then sees the new epoch,
/// so no write of an old holder lands after a new holder read the project. The
/// statement answers the leases it found; any missing one is a broken fence, and then
/// nothing was written.
///
/// `$gone` is the deletions' part, or nothing: a group without deletions runs the
/// cached statement without it, and a group with some sends its own unnamed statement
/// (`query_typed`), which PostgreSQL plans for the values at hand.
/// A cached plan of `key = ANY($1)` made while the table was small is a sequential
/// scan that it keeps as the table grows (seen: every commit scanning 55,000 rows for
/// no deletion, 3.5 of its 4.9 ms), where a plan made for the statement at hand
/// looks the keys up in the primary key.
macro_rules! commit_statement {
    ($gone:literal) => {
        concat!(
            "WITH held AS ( \
                 SELECT l.project FROM mailroom_leases l \
                 JOIN unnest($4::bytea[], $5::bigint[]) AS f(project, epoch) \
                   ON l.project = f.project AND l.epoch = f.epoch AND l.holder = $7 \
                 FOR SHARE OF l), \
             ok AS (SELECT count(*) = cardinality($4::bytea[]) AS ok FROM held), ",
            $gone,
            "put AS (INSERT INTO kv (key, value, project) \
                 SELECT k, v, p FROM unnest($2::bytea[], $3::bytea[], $6::bytea[]) AS u(k, v, p) \
                 WHERE (SELECT ok FROM ok) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value) \
             SELECT project FROM held"
        )
    };
}

/// The commit of a group that deletes nothing (`$1` is then an empty array).
const COMMIT: &str = commit_statement!("");

/// The commit of a group with deletions (every delivery outcome removes its outbox
/// key), sent as an unnamed statement: planned for each such group, in the same one
/// round trip.
const COMMIT_DELETING: &str = commit_statement!(
    "gone AS (DELETE FROM kv WHERE key = ANY($1::bytea[]) AND (SELECT ok FROM ok)), "
);

/// The parameters' types of both commits, given so that `COMMIT` may leave `$1` out.
const COMMIT_TYPES: [Type; 7] = [
    Type::BYTEA_ARRAY,
    Type::BYTEA_ARRAY,
    Type::BYTEA_ARRAY,
    Type::BYTEA_ARRAY,
    Type::INT8_ARRAY,
    Type::BYTEA_ARRAY,
    Type::BYTEA,
];

pub struct Db {
    runtime: Option<tokio::runtime::Runtime>,
    pub(super) pool: Pool,
    /// Where the store is, for messages (no password).
    pub place: String,
    /// This process, among every process that ever opened the schema: a lease records
    /// the process that holds it, not only the node id, so a second process started
    /// under the same `cluster.node_id` (a restart while the first is merely paused)
    /// holds it under a new epoch and the first one's writes are fenced off.
    pub process: [u8; 16],
    /// How long a commit or a lease call may take (`statement_timeout_ms`).
    pub(super) limit: Duration,
}

/// The `application_name` of every connection of a process: `leases.rs` takes a
/// lease from an earlier process of the same node at once when no connection of it is
/// left (it was killed; the kernel closed its sockets), and waits for the lease to run
/// out while one is (it may only be paused).
pub fn application_name(process: &[u8]) -> String {
    format!("mailroom {}", hex(process))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Db {
    /// Connects, migrates the schema and loads the global keys (`partial`) or every
    /// pair.
    pub fn open(config: &PostgresConfig) -> Result<(Db, Map)> {
        let process: [u8; 16] = rand::random();
        let mut pg: tokio_postgres::Config = config
            .url
            .parse()
            .map_err(|e| Error::storage_caused("storage.postgres.url is not a valid URL", e))?;
        let place = describe(&pg);
        pg.application_name(application_name(&process));
        let limit = Duration::from_millis(config.statement_timeout_ms.max(1));
        // A statement the server works on too long is cancelled there; a connection
        // whose peer vanished (a half-open TCP connection: no reset ever comes) is
        // closed by the kernel once sent data waits `limit` for an acknowledgement, or
        // an idle one fails its keepalive probes, instead of hanging a call for hours.
        let options = format!(
            "{} -c statement_timeout={}",
            pg.get_options().unwrap_or(""),
            limit.as_millis()
        );
        pg.options(options.trim_start())
            .connect_timeout(limit)
            .tcp_user_timeout(limit)
            .keepalives(true)
            .keepalives_idle(limit)
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("store-postgres")
            .enable_all()
            .build()
            .map_err(|e| Error::storage_caused("starting the PostgreSQL runtime", e))?;
        let recycling = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        // A socket host never speaks TLS (the server answers its SSLRequest with "no").
        let over_tcp = pg
            .get_hosts()
            .iter()
            .any(|h| matches!(h, tokio_postgres::config::Host::Tcp(_)));
        let tls = match over_tcp {
            true => super::tls::connector(config.tls, config.ca_file.as_deref())?,
            false => None,
        };
        let manager = match tls {
            Some(tls) => {
                pg.ssl_mode(tokio_postgres::config::SslMode::Require);
                Manager::from_config(pg, tls, recycling)
            }
            None => Manager::from_config(pg, NoTls, recycling),
        };
        // All connections busy (each stuck in a slow call) must not queue a caller for
        // longer than one call may take.
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(limit))
            .create_timeout(Some(limit))
            .build()
            .map_err(|e| Error::storage_caused("building the PostgreSQL pool", e))?;
        let db = Db {
            runtime: Some(runtime),
            pool,
            place,
            process,
            limit,
        };
        let (pool, at, wait, partial) = (
            db.pool.clone(),
            db.place.clone(),
            config.lock_wait_ms,
            config.partial,
        );
        let map = db.run(async move {
            let mut client = pool.get().await.map_err(|e| connecting(&at, e))?;
            no_older_server(&client, &at).await?;
            schema::migrate(&client, wait).await?;
            let (what, filter) = if partial {
                ("the global keys", "WHERE project IS NULL")
            } else {
                ("every pair", "")
            };
            let mut map = Map::new();
            load_into(&mut client, &mut map, filter, &[]).await?;
            tracing::info!(pairs = map.len(), "loaded {what} from PostgreSQL");
            Ok::<_, Error>(map)
        })??;
        Ok((db, map))
    }

    /// The pairs of one project, as PostgreSQL has them now.
    pub fn project(&self, p: ProjectId) -> Result<Map> {
        let (pool, at) = (self.pool.clone(), self.place.clone());
        self.run(async move {
            let mut client = pool.get().await.map_err(|e| connecting(&at, e))?;
            let mut map = Map::new();
            let id: &[u8] = p.as_bytes();
            load_into(&mut client, &mut map, "WHERE project = $1", &[&id]).await?;
            Ok(map)
        })?
    }

    /// The pairs whose keys are in [lower, upper) (no upper: to the end).
    pub fn range(&self, lower: Vec<u8>, upper: Option<Vec<u8>>) -> Result<Map> {
        let (pool, at) = (self.pool.clone(), self.place.clone());
        self.run(async move {
            let mut client = pool.get().await.map_err(|e| connecting(&at, e))?;
            let mut map = Map::new();
            match upper {
                Some(upper) => {
                    load_into(
                        &mut client,
                        &mut map,
                        "WHERE key >= $1 AND key < $2",
                        &[&lower, &upper],
                    )
                    .await?
                }
                None => load_into(&mut client, &mut map, "WHERE key >= $1", &[&lower]).await?,
            }
            Ok(map)
        })?
    }

    /// Inserts a global pair unless its key is there; answers the value stored. One
    /// statement: the insert's row when it won, else the row that was there (the
    /// outer SELECT sees the table as it was when the statement began, and the insert
    /// waits for a racing insert of the same key to commit, then does nothing).
    pub fn put_if_absent(&self, key: Vec<u8>, value: Vec<u8>) -> Result<Vec<u8>> {
        let (pool, at, limit) = (self.pool.clone(), self.place.clone(), self.limit);
        self.run(async move {
            tokio::time::timeout(limit + GRACE, async {
                let client = pool.get().await.map_err(|e| connecting(&at, e))?;
                let row = client
                    .query_opt(
                        "WITH ins AS (INSERT INTO kv (key, value, project) VALUES ($1, $2, NULL) \
                             ON CONFLICT (key) DO NOTHING RETURNING value) \
                         SELECT value FROM ins",
                        &[&key, &value],
                    )
                    .await
                    .map_err(failed)?;
                if let Some(row) = row {
                    return Ok(row.get::<_, Vec<u8>>(0));
                }
                // Another process's insert won (and committed: ours waited for it).
                let row = client
                    .query_one("SELECT value FROM kv WHERE key = $1", &[&key])
                    .await
                    .map_err(failed)?;
                Ok(row.get::<_, Vec<u8>>(0))
            })
            .await
            .unwrap_or_else(|_| Err(timed_out("an insert of a global key", limit)))
        })?
    }

    /// Runs `fut` on the store's runtime and answers its outcome to an await on any
    /// runtime (the lease table's calls).
    pub fn spawn<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T>> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send + 'static {
        let task = self.runtime.as_ref().map(|rt| rt.spawn(fut));
        async move {
            match task {
                Some(task) => task
                    .await
                    .map_err(|e| Error::storage_caused("the PostgreSQL runtime stopped", e))?,
                None => Err(Error::storage("the PostgreSQL store is closed")),
            }
        }
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

    /// Writes one group of writes in one transaction when every fence of the group
    /// holds; answers the projects whose fence is broken (then nothing was written).
    /// Hands the group back, so the caller applies it to its copy (or queues it again)
    /// without a copy of its values.
    pub fn commit(&self, group: Group) -> (Group, Result<Vec<ProjectId>>) {
        let (pool, at, process, limit) = (
            self.pool.clone(),
            self.place.clone(),
            self.process,
            self.limit,
        );
        let sent = self.run(async move {
            let outcome = tokio::time::timeout(limit + GRACE, async {
                let client = pool.get().await.map_err(|e| connecting(&at, e))?;
                let (fenced, epochs): (Vec<&[u8]>, Vec<i64>) = group
                    .fences
                    .iter()
                    .map(|(p, e)| (p.as_bytes().as_slice(), *e as i64))
                    .unzip();
                let process = process.as_slice();
                let params: [&(dyn ToSql + Sync); 7] = [
                    &group.gone,
                    &group.keys,
                    &group.values,
                    &fenced,
                    &epochs,
                    &group.projects,
                    &process,
                ];
                let held = if group.gone.is_empty() {
                    let statement = client
                        .prepare_typed_cached(COMMIT, &COMMIT_TYPES)
                        .await
                        .map_err(failed)?;
                    client.query(&statement, &params).await
                } else {
                    // An unnamed statement, planned for these values: still one round
                    // trip (parse, bind and execute sent together).
                    let typed: Vec<(&(dyn ToSql + Sync), Type)> =
                        params.into_iter().zip(COMMIT_TYPES).collect();
                    client.query_typed(COMMIT_DELETING, &typed).await
                }
                .map_err(failed)?;
                let held: Vec<&[u8]> = held.iter().map(|r| r.get(0)).collect();
                Ok(group
                    .fences
                    .iter()
                    .map(|(p, _)| *p)
                    .filter(|p| !held.contains(&p.as_bytes().as_slice()))
                    .collect())
            })
            .await
            .unwrap_or_else(|_| Err(timed_out("a commit", limit)));
            (group, outcome)
        });
        match sent {
            Ok(done) => done,
            // The runtime is gone (the store is closing): nothing was written.
            Err(e) => (Group::default(), Err(e)),
        }
    }
}

/// Writes folded to their last value per key, split by kind, each part in key order,
/// with the project of each written key and the fences the commit checks.
#[derive(Default)]
pub struct Group {
    pub gone: Vec<Vec<u8>>,
    pub keys: Vec<Vec<u8>>,
    pub values: Vec<Vec<u8>>,
    /// `keys::project_of` of each of `keys` (the `project` column).
    pub projects: Vec<Option<Vec<u8>>>,
    /// (project, epoch) of each fenced project the group writes.
    pub fences: Vec<(ProjectId, u64)>,
}

impl From<Folded> for Group {
    fn from(folded: Folded) -> Self {
        let mut g = Group::default();
        for (k, v) in folded {
            match v {
                Some(v) => {
                    g.projects
                        .push(keys::project_of(&k).map(|p| p.as_bytes().to_vec()));
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
        if let Some(rt) = self.runtime.take() {
            // Not a blocking shutdown: the store may be dropped inside another runtime.
            rt.shutdown_background();
        }
    }
}

/// Streams the pairs the filter selects into the map. A large project takes longer
/// than one commit may: its read is exempt from `statement_timeout` (the connection's
/// keepalive and user timeout still end a dead one).
async fn load_into(
    client: &mut Client,
    map: &mut Map,
    filter: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<()> {
    let started = Instant::now();
    let tx = client.transaction().await.map_err(failed)?;
    tx.batch_execute("SET LOCAL statement_timeout = 0")
        .await
        .map_err(failed)?;
    let rows = tx
        .query_raw(
            &format!("SELECT key, value FROM kv {filter}"),
            params.iter().copied(),
        )
        .await
        .map_err(failed)?;
    pin_mut!(rows);
    let mut n = 0usize;
    while let Some(row) = rows.try_next().await.map_err(failed)? {
        map.insert(
            Bytes::from(row.get::<_, &[u8]>(0)),
            Bytes::from(row.get::<_, &[u8]>(1)),
        );
        n += 1;
    }
    tx.commit().await.map_err(failed)?;
    tracing::debug!(
        pairs = n,
        millis = started.elapsed().as_millis() as u64,
        filter,
        "read pairs from PostgreSQL"
    );
    Ok(())
}

/// Servers before issue #25 held an exclusive session lock on their schema for their
/// whole run, and write pairs without a project: one must not share a schema with a
/// node of a cluster. A shared try of the same lock fails while one runs (and never
/// between two nodes of this version, which take it shared and let go at once).
async fn no_older_server(client: &Client, at: &str) -> Result<()> {
    let free: bool = client
        .query_one(
            "SELECT pg_try_advisory_lock_shared($1, hashtext(current_schema()))",
            &[&OLD_LOCK_CLASS],
        )
        .await
        .map_err(failed)?
        .get(0);
    if !free {
        return Err(Error::storage(format!(
            "a Mailroom server of an older version is running on {at} (it holds the schema's \
             lock); stop it before starting this version"
        )));
    }
    client
        .execute(
            "SELECT pg_advisory_unlock_shared($1, hashtext(current_schema()))",
            &[&OLD_LOCK_CLASS],
        )
        .await
        .map_err(failed)?;
    Ok(())
}

/// The first key of the older versions' exclusive lock ("mail").
const OLD_LOCK_CLASS: i32 = 0x6d61_696c;

/// A project id read back from a bytea column.
pub fn project_id(bytes: &[u8]) -> Result<ProjectId> {
    let id: [u8; 16] = bytes
        .try_into()
        .map_err(|_| Error::storage("a project id in PostgreSQL is not 16 bytes"))?;
    Ok(ProjectId::from_key_bytes(id))
}

/// Beyond the server's `statement_timeout`, for the round trip of its cancellation.
pub const GRACE: Duration = Duration::from_secs(1);

/// A call that got no answer in time (a slow server or a vanished connection).
pub fn timed_out(what: &str, limit: Duration) -> Error {
    Error::unavailable(format!(
        "{what} on PostgreSQL got no answer within {} ms (storage.postgres.statement_timeout_ms)",
        limit.as_millis()
    ))
}

/// A failed statement; a full disk on the server says so, so that the edge answers 503,
/// and so does a statement the server cancelled for its timeout, or a lost connection.
pub fn failed(e: tokio_postgres::Error) -> Error {
    if e.code() == Some(&SqlState::DISK_FULL) {
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, e);
        return Error::storage_caused("PostgreSQL is out of disk space", full);
    }
    if e.code() == Some(&SqlState::QUERY_CANCELED) {
        let late = std::io::Error::new(std::io::ErrorKind::TimedOut, e);
        return Error::storage_caused(
            "a PostgreSQL statement ran past storage.postgres.statement_timeout_ms",
            late,
        );
    }
    if e.is_closed() {
        let gone = std::io::Error::new(std::io::ErrorKind::NotConnected, e);
        return Error::storage_caused("the connection to PostgreSQL was lost", gone);
    }
    Error::storage_caused("a PostgreSQL statement failed", e)
}

/// No connection to be had (the server is down or every connection is busy past the
/// limit): the edge answers 503, as the database may be back in a moment.
pub(super) fn connecting(at: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    let unreachable = std::io::Error::new(std::io::ErrorKind::NotConnected, e);
    Error::storage_caused(format!("connecting to PostgreSQL at {at}"), unreachable)
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
