//! The CLI beside a running server. A running server holds the data directory (sled
//! allows one process), so the project and domain commands reach it through a Unix
//! socket in that directory, `mailroom.sock`: one JSON request line, one JSON reply line
//! (`{"ok": ...}` or `{"error": "..."}`), one request a connection. The socket is made
//! mode 0600 before anyone can connect, so file permissions are its authentication, as
//! they are for the data itself. When no server answers there, the CLI opens the store
//! itself and runs the same request (`apply`).
//!
//! A long command (a backup, a project export) writes to the file the CLI names (the
//! CLI runs as the same user as the server) and sends `{"progress": {records, bytes}}`
//! lines, about one a second, before its answer.

use mailroom_actors::engine::domains::{Domain, DomainName, RecordPolicy};
use mailroom_actors::engine::offline;
use mailroom_actors::engine::projects::{Admin, Projects};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mailroom_actors::model::page::MAX_LIMIT;
use mailroom_actors::model::{PageRequest, ProjectId, Timestamp};
use mailroom_actors::store::backup::{self, Tally};
use mailroom_actors::store::Store;
use mailroom_actors::{Clock, SystemClock};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::api::admin::{keys_json, project_json};
use crate::api::domains::DomainView;
use crate::config::Settings;
use crate::failure::Failure;

/// A request is a command and a few ids; anything longer is not one.
const MAX_REQUEST_BYTES: u64 = 16 * 1024;

/// What the CLI asks, the same whether the server or the CLI itself carries it out.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Request {
    ProjectCreate {
        name: String,
    },
    ProjectList,
    ProjectDisable {
        id: ProjectId,
    },
    ProjectEnable {
        id: ProjectId,
    },
    ProjectRotateKeys {
        id: ProjectId,
    },
    DomainTrust {
        project: ProjectId,
        #[serde(serialize_with = "as_str")]
        domain: DomainName,
    },
    DomainList {
        project: ProjectId,
    },
    /// A consistent snapshot of the whole store into a new file (an absolute path).
    Backup {
        out: PathBuf,
    },
    /// One project as JSON lines into a new file (an absolute path).
    ProjectExport {
        id: ProjectId,
        out: PathBuf,
    },
}

fn as_str<S: Serializer>(d: &DomainName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(d.as_str())
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Ok(Value),
    Error(String),
    Progress(Progress),
}

/// Records and bytes written so far by a long command.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Progress {
    pub records: u64,
    pub bytes: u64,
}

impl From<Tally> for Progress {
    fn from(t: Tally) -> Self {
        Progress {
            records: t.records,
            bytes: t.bytes,
        }
    }
}

/// Runs a command: through the running server when one answers on the data directory's
/// socket, else on the store directly.
pub fn run(settings: &Settings, request: Request) -> Result<Value, Failure> {
    run_reporting(settings, request, &mut |_| {})
}

/// `run`, telling `report` how a long command gets on.
pub fn run_reporting(
    settings: &Settings,
    request: Request,
    report: &mut dyn FnMut(Progress),
) -> Result<Value, Failure> {
    match ask(settings, &request, report) {
        Some(answer) => answer,
        None => run_offline(settings, request, report),
    }
}

/// The running server's answer, or None when no server listens on the socket.
fn ask(
    settings: &Settings,
    request: &Request,
    report: &mut dyn FnMut(Progress),
) -> Option<Result<Value, Failure>> {
    let path = settings.control_socket();
    let stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        // No socket, a stale one, or a path too long to be one: nothing runs there.
        Err(e) if is_nobody_there(&e) => return None,
        Err(e) => {
            return Some(Err(Failure::caused(
                format!("reaching the running server through {}", path.display()),
                e,
            )))
        }
    };
    Some(exchange(
        stream,
        request,
        Duration::from_secs(settings.control.timeout_seconds.max(1)),
        report,
    ))
}

fn is_nobody_there(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::NotFound | ErrorKind::ConnectionRefused | ErrorKind::InvalidInput
    )
}

fn exchange(
    mut stream: UnixStream,
    request: &Request,
    timeout: Duration,
    report: &mut dyn FnMut(Progress),
) -> Result<Value, Failure> {
    let talking = |e| Failure::caused("talking to the running server", e);
    stream.set_read_timeout(Some(timeout)).map_err(talking)?;
    stream.set_write_timeout(Some(timeout)).map_err(talking)?;
    let mut line =
        serde_json::to_string(request).map_err(|e| Failure::caused("writing the request", e))?;
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(talking)?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut answer = String::new();
        // The timeout is per line: a long command sends progress about once a second.
        return match reader.read_line(&mut answer) {
            Ok(0) => Err(Failure::said(
                "the running server closed the connection without an answer",
            )),
            Ok(_) => match serde_json::from_str(&answer) {
                Ok(Reply::Ok(v)) => Ok(v),
                Ok(Reply::Error(message)) => Err(Failure::said(message)),
                Ok(Reply::Progress(p)) => {
                    report(p);
                    continue;
                }
                Err(e) => Err(Failure::caused("reading the running server's answer", e)),
            },
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(Failure::said(format!(
                    "the running server did not answer within {} s (control.timeout_seconds)",
                    timeout.as_secs()
                )))
            }
            Err(e) => Err(talking(e)),
        };
    }
}

/// No server runs on the data directory: open the store, apply, flush.
fn run_offline(
    settings: &Settings,
    request: Request,
    report: &mut dyn FnMut(Progress),
) -> Result<Value, Failure> {
    let store = settings.storage.open().map_err(Failure::engine)?;
    let projects = Projects::new(store.clone());
    let now = Timestamp::from(SystemClock.now());
    let out = apply(
        &projects,
        &*store,
        request,
        now,
        &settings.record_policy(),
        settings.limits.max_domains,
        &mut |t| report(t.into()),
    )?;
    store.flush_blocking().map_err(Failure::engine)?;
    Ok(out)
}

/// The request against the store. A running server sends DomainTrust to the project's
/// actor instead (it owns the project's writes); everything else is the same call.
fn apply(
    projects: &Projects,
    store: &dyn Store,
    request: Request,
    now: Timestamp,
    policy: &RecordPolicy,
    max_domains: usize,
    report: &mut dyn FnMut(Tally),
) -> Result<Value, Failure> {
    let e = Failure::engine;
    Ok(match request {
        Request::ProjectCreate { name } => {
            keys_json(&offline::create_project(projects, &name, now).map_err(e)?)
        }
        Request::ProjectList => Value::Array(
            projects
                .list()
                .map_err(e)?
                .iter()
                .map(project_json)
                .collect(),
        ),
        Request::ProjectDisable { id } => {
            project_json(&offline::set_project_disabled(projects, id, true).map_err(e)?)
        }
        Request::ProjectEnable { id } => {
            project_json(&offline::set_project_disabled(projects, id, false).map_err(e)?)
        }
        Request::ProjectRotateKeys { id } => {
            keys_json(&offline::rotate_project_keys(projects, id, now).map_err(e)?)
        }
        Request::DomainTrust { project, domain } => {
            projects.get(project).map_err(e)?;
            let d = offline::trust_domain(store, project, domain, now, max_domains).map_err(e)?;
            domain_json(&d, policy)
        }
        Request::DomainList { project } => {
            projects.get(project).map_err(e)?;
            let mut all = Vec::new();
            let mut page = PageRequest::first(MAX_LIMIT);
            loop {
                let got = offline::list_domains(store, project, None, &page).map_err(e)?;
                all.extend(got.items.iter().map(|d| domain_json(d, policy)));
                let Some(cursor) = got.next_cursor else {
                    break Value::Array(all);
                };
                page =
                    PageRequest::parse(Some(&MAX_LIMIT.to_string()), Some(&cursor)).map_err(e)?;
            }
        }
        Request::Backup { out } => {
            let tally = backup::write_file(store, &out, now.millis(), report).map_err(e)?;
            written(&out, tally)
        }
        Request::ProjectExport { id, out } => {
            let tally = crate::export::write_file(projects, store, id, &out, report)?;
            written(&out, tally)
        }
    })
}

fn written(file: &Path, t: Tally) -> Value {
    serde_json::json!({"file": file, "records": t.records, "bytes": t.bytes})
}

fn domain_json(d: &Domain, policy: &RecordPolicy) -> Value {
    serde_json::to_value(DomainView::new(d, policy)).unwrap_or_default()
}

/// What the running server needs to answer: the very objects the /admin API uses (the
/// same `Projects`, so that a disabled project's keys stop working at once).
#[derive(Clone)]
pub struct Control {
    pub projects: Projects,
    /// The operator's writes, through the project's actor.
    pub admin: Admin,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    /// What a domain publishes (see `Settings::record_policy`).
    pub domain_records: RecordPolicy,
    /// `limits.max_domains`, for a domain made through the control socket.
    pub max_domains: usize,
    /// How long a client may take to send its request line.
    pub read_timeout: Duration,
    /// This node of a cluster: a command for a project is for the project's owner,
    /// which this node becomes (as for an HTTP request) when no node holds it.
    pub cluster: Option<Arc<crate::cluster::ClusterNode>>,
    /// On a node of a cluster, the database to open whole for commands that read every
    /// project (backup, export, domain list): the node's own store holds only the
    /// projects it owns, and would answer them partly or empty without saying so.
    pub whole: Option<crate::config::Storage>,
}

impl Control {
    async fn answer(
        &self,
        request: Request,
        progress: tokio::sync::mpsc::UnboundedSender<Progress>,
    ) -> Result<Value, Failure> {
        let now = Timestamp::from(self.clock.now());
        // A running server's project writes go through the engine's admin door, durable
        // when it answers, as the /admin API's do.
        let e = Failure::engine;
        match request {
            Request::ProjectCreate { name } => {
                return Ok(keys_json(&self.admin.create(&name).await.map_err(e)?));
            }
            Request::ProjectDisable { id } => {
                return Ok(project_json(
                    &self.admin.set_disabled(id, true).await.map_err(e)?,
                ));
            }
            Request::ProjectEnable { id } => {
                return Ok(project_json(
                    &self.admin.set_disabled(id, false).await.map_err(e)?,
                ));
            }
            Request::ProjectRotateKeys { id } => {
                return Ok(keys_json(&self.admin.rotate_keys(id).await.map_err(e)?));
            }
            _ => {}
        }
        if let Request::DomainTrust { project, domain } = request {
            self.admin
                .projects()
                .get(project)
                .map_err(Failure::engine)?;
            if let Some(cluster) = &self.cluster {
                // A project made a moment ago is held by no node yet: this node takes
                // it, as it would for an HTTP request; one another node holds is its.
                match cluster.route(project).await.map_err(Failure::engine)? {
                    crate::cluster::Route::Serve => {}
                    crate::cluster::Route::Forward { node, .. } => {
                        return Err(Failure::said(format!(
                            "node {node} holds this project: run the command beside that node"
                        )))
                    }
                }
            }
            let d = self
                .admin
                .trust_domain(project, domain)
                .await
                .map_err(Failure::engine)?;
            return Ok(domain_json(&d, &self.domain_records));
        }
        let reads_every_project = matches!(
            request,
            Request::Backup { .. } | Request::ProjectExport { .. } | Request::DomainList { .. }
        );
        let whole = self.whole.clone().filter(|_| reads_every_project);
        let (projects, store, spf, max_domains) = (
            self.projects.clone(),
            self.store.clone(),
            self.domain_records.clone(),
            self.max_domains,
        );
        let value = actix_web::rt::task::spawn_blocking(move || {
            let mut report = |t: Tally| {
                let _ = progress.send(t.into());
            };
            let (projects, store) = match whole {
                Some(storage) => {
                    // Only read: the leases of the nodes are not touched.
                    let store = storage.open().map_err(Failure::engine)?;
                    (Projects::new(store.clone()), store)
                }
                None => (projects, store),
            };
            apply(
                &projects,
                &*store,
                request,
                now,
                &spf,
                max_domains,
                &mut report,
            )
        })
        .await
        .map_err(|e| Failure::said(format!("the command's task failed: {e}")))??;
        self.store.durable().await.map_err(Failure::engine)?;
        Ok(value)
    }
}

/// Serves the socket at `path` until the process ends; None (with a warning in the log)
/// when it cannot be made, as the server runs fine without it.
pub fn listen(path: &Path, control: Control) -> Option<PathBuf> {
    match bind_private(path) {
        Ok(listener) => {
            actix_web::rt::spawn(accept(listener, control));
            Some(path.to_owned())
        }
        Err(e) => {
            tracing::warn!(
                socket = %path.display(),
                error = %mailroom_actors::error::chain(&e),
                "the control socket could not be made; project and domain commands \
                 will need the server stopped (or the /admin API)"
            );
            None
        }
    }
}

/// Binds in a fresh directory only the owner may enter, narrows the socket to 0600,
/// then renames it into place: no moment in which another user could connect. The
/// rename also replaces a socket a killed server left behind (the store's lock, taken
/// before this, says no other server runs here).
fn bind_private(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    let dir = path.with_file_name(format!(".ms-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let result = (|| {
        let inner = dir.join("s");
        let listener = std::os::unix::net::UnixListener::bind(&inner)?;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&inner, path)?;
        listener.set_nonblocking(true)?;
        tokio::net::UnixListener::from_std(listener)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn accept(listener: tokio::net::UnixListener, control: Control) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let control = control.clone();
                actix_web::rt::spawn(async move { serve(stream, control).await });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accepting on the control socket");
                // Out of file descriptors, say: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve(stream: tokio::net::UnixStream, control: Control) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = tokio::io::BufReader::new(read.take(MAX_REQUEST_BYTES));
    let reply = match tokio::time::timeout(control.read_timeout, reader.read_line(&mut line)).await
    {
        Ok(Ok(_)) if line.ends_with('\n') => match serde_json::from_str::<Request>(&line) {
            Ok(request) => match answer_reporting(&control, request, &mut write).await {
                Ok(v) => Reply::Ok(v),
                Err(f) => Reply::Error(f.explain()),
            },
            Err(e) => Reply::Error(format!("not a request this server knows: {e}")),
        },
        Ok(Ok(_)) => Reply::Error(format!(
            "a request is one line of at most {MAX_REQUEST_BYTES} bytes"
        )),
        Ok(Err(e)) => Reply::Error(format!("reading the request: {e}")),
        Err(_) => return,
    };
    let mut out = serde_json::to_string(&reply).unwrap_or_default();
    out.push('\n');
    let _ = write.write_all(out.as_bytes()).await;
}

/// The answer, with a progress line to the client for each report on the way. A client
/// that went away does not stop the command (a backup still completes its file).
async fn answer_reporting(
    control: &Control,
    request: Request,
    write: &mut tokio::net::unix::OwnedWriteHalf,
) -> Result<Value, Failure> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = control.answer(request, tx);
    tokio::pin!(job);
    let mut listening = true;
    loop {
        tokio::select! {
            result = &mut job => return result,
            Some(p) = rx.recv(), if listening => {
                let mut out = serde_json::to_string(&Reply::Progress(p)).unwrap_or_default();
                out.push('\n');
                listening = write.write_all(out.as_bytes()).await.is_ok();
            }
        }
    }
}
