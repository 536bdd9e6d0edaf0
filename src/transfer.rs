//! The CLI side of `mailroom backup`, `mailroom restore` and `mailroom project export`:
//! paths made absolute (a running server resolves them, not this process), progress
//! and a summary on stderr, the JSON answer on stdout.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use mailroom_actors::engine::offline::{self, KEY_FORMAT};
use mailroom_actors::model::ProjectId;
use mailroom_actors::store::{backup, Store};
use serde_json::Value;

use crate::config::Settings;
use crate::control::{self, Progress, Request};
use crate::failure::Failure;

fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(path)
        .map_err(|e| Failure::caused(format!("resolving {}", path.display()), e))
}

/// Prints one progress line on stderr.
fn progress(what: &'static str) -> impl FnMut(Progress) {
    move |p| eprintln!("{what}: {} records, {}", p.records, bytes(p.bytes))
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

fn summary(what: &str, answer: &Value, started: Instant) {
    eprintln!(
        "{what}: done, {} records, {} in {:.1} s",
        answer["records"],
        bytes(answer["bytes"].as_u64().unwrap_or(0)),
        started.elapsed().as_secs_f64()
    );
}

pub fn backup(settings: &Settings, out: &Path) -> Result<(), Failure> {
    let started = Instant::now();
    let request = Request::Backup {
        out: absolute(out)?,
    };
    let answer = control::run_reporting(settings, request, &mut progress("backup"))?;
    summary("backup", &answer, started);
    println!("{answer}");
    Ok(())
}

/// Restore runs without a server: it makes a data directory no server uses yet. On
/// PostgreSQL it makes one in `dir` on the way, moves it into the database's schema
/// (which must be empty) and removes it.
pub fn restore(settings: &Settings, file: &Path, dir: &Path) -> Result<(), Failure> {
    let (mut answer, store) = restore_into_sled(settings, file, dir)?;
    if settings.storage.backend != crate::config::Backend::Postgres {
        drop(store);
        println!("{answer}");
        return Ok(());
    }
    let url = settings.storage.postgres.url.trim();
    if url.is_empty() {
        return Err(Failure::said(
            "storage.backend is \"postgres\" but storage.postgres.url is empty: nowhere to \
             restore into",
        ));
    }
    // From the handle that wrote the records: sled may not have released a dropped
    // one's lock yet.
    let moved = move_to_postgres(settings, &*store, dir, url, 5000);
    drop(store);
    if let Ok(moved) = &moved {
        let _ = std::fs::remove_dir_all(dir);
        answer["postgres"] = moved.clone();
        println!("{answer}");
    } else {
        eprintln!(
            "restore: the backup is unpacked in {}; `mailroom migrate --to-postgres URL \
             --data-dir {}` goes on from where this stopped",
            dir.display(),
            dir.display()
        );
    }
    moved.map(|_| ())
}

/// `mailroom migrate --to-postgres URL`: the sled data directory at storage.path into
/// the schema at `url`.
pub fn migrate(settings: &Settings, url: &str, batch: usize) -> Result<(), Failure> {
    let dir = &settings.storage.path;
    if !dir.join("db").is_dir() {
        return Err(Failure::said(format!(
            "{} is not a sled data directory (no db/ in it): point --data-dir at the \
             directory a sled server ran on",
            dir.display()
        )));
    }
    let s = &settings.storage;
    // Brought to this version's key layout first (what a start would do), so the
    // records land in the layout the nodes read.
    let source = offline::open_sled(dir, s.sled(), s.upgrade_slice).map_err(Failure::engine)?;
    println!("{}", move_to_postgres(settings, &*source, dir, url, batch)?);
    Ok(())
}

/// Every record of `source` (the sled store of `dir`, in this version's layout) into the
/// empty schema at `url`, or on from where an earlier run stopped.
fn move_to_postgres(
    settings: &Settings,
    source: &dyn Store,
    dir: &Path,
    url: &str,
    batch: usize,
) -> Result<Value, Failure> {
    use mailroom_actors::store::postgres::migrate;
    let started = Instant::now();
    let s = &settings.storage;
    let target = mailroom_actors::store::PostgresStore::open(&s.postgres.store_config(url, false))
        .map_err(Failure::engine)?;
    let source_id = migrate::fingerprint(source).map_err(Failure::engine)?;
    let after = migrate::resume_point(&*target, &source_id).map_err(Failure::engine)?;
    if let Some(k) = &after {
        eprintln!(
            "migrate: an earlier run stopped; going on after {}",
            String::from_utf8_lossy(k).escape_debug()
        );
    }
    let mut last = Instant::now();
    let moved = migrate::copy(
        source.scan(b"", after.as_deref(), false),
        &*target,
        &source_id,
        after.as_deref(),
        batch,
        &mut |m| {
            if last.elapsed().as_secs() >= 2 {
                last = Instant::now();
                eprintln!("migrate: {} records", m.pairs);
            }
        },
    )
    .map_err(Failure::engine)?;
    let answer = serde_json::json!({
        "from": dir,
        "records": moved.pairs,
        "kinds": moved.kinds,
        "resumed": after.is_some(),
        "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    eprintln!(
        "migrate: done, {} records in {:.1} s; start the nodes with storage.backend = \
         \"postgres\" and this URL",
        moved.pairs,
        started.elapsed().as_secs_f64()
    );
    Ok(answer)
}

/// The data directory `dir` from the backup `file`, in this version's layout, and the
/// store open on it.
fn restore_into_sled(
    settings: &Settings,
    file: &Path,
    dir: &Path,
) -> Result<(Value, std::sync::Arc<mailroom_actors::store::SledStore>), Failure> {
    let started = Instant::now();
    let mut report = progress("restore");
    let restored = backup::restore(file, dir, settings.storage.sled(), &mut |t| {
        report(Progress::from(t))
    })
    .map_err(Failure::engine)?;
    let (header, tally) = (restored.header, restored.tally);
    // Migrated now rather than at the first start, so a backup that cannot be brought
    // up to date fails here, where the operator is looking; on the handle that wrote
    // the records (sled may not have released a dropped one's lock yet).
    if restored.layout != KEY_FORMAT {
        offline::upgrade(
            &*restored.store,
            restored.layout,
            settings.storage.upgrade_slice,
        )
        .map_err(Failure::engine)?;
    }
    restored.store.flush_blocking().map_err(Failure::engine)?;
    let answer = serde_json::json!({
        "dataDir": dir,
        "backupKeyLayout": header.key_format,
        "keyLayout": KEY_FORMAT,
        "records": tally.records,
        "bytes": tally.bytes,
        "backupCreatedAt": mailroom_actors::model::Timestamp::from(header.created_at_ms).to_iso(),
    });
    summary("restore", &answer, started);
    Ok((answer, restored.store))
}

/// To a file when `out` is given; else to stdout, through a file in a private temporary
/// directory (a running server writes the export, and it can only write files).
pub fn export(settings: &Settings, id: ProjectId, out: Option<PathBuf>) -> Result<(), Failure> {
    let started = Instant::now();
    let (path, scratch) = match out {
        Some(out) => (absolute(&out)?, None),
        None => {
            let dir = std::env::temp_dir().join(format!(
                "mailroom-export-{}-{}",
                std::process::id(),
                uuid::Uuid::now_v7().simple()
            ));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|e| Failure::caused(format!("creating {}", dir.display()), e))?;
            (dir.join("export.jsonl"), Some(dir))
        }
    };
    let request = Request::ProjectExport {
        id,
        out: path.clone(),
    };
    let result =
        control::run_reporting(settings, request, &mut progress("export")).and_then(|answer| {
            if scratch.is_some() {
                let mut file = std::fs::File::open(&path)
                    .map_err(|e| Failure::caused(format!("opening {}", path.display()), e))?;
                let mut stdout = std::io::stdout().lock();
                std::io::copy(&mut file, &mut stdout)
                    .and_then(|_| stdout.flush())
                    .map_err(|e| Failure::caused("writing to stdout", e))?;
            } else {
                println!("{answer}");
            }
            Ok(answer)
        });
    if let Some(dir) = scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
    summary("export", &result?, started);
    Ok(())
}
