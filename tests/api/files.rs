//! What Mailroom writes is its owner's alone, whatever umask it was started with (the
//! harness starts every process under 022): the data directory and everything in it
//! (the store, its write-ahead log, outbox files, the control socket), backups, exports
//! and restored directories. The store holds every contact and the link key.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::app::{mailroom, mailroom_with, TestApp};
use crate::support::settings::Backend;

/// Every path under `dir` (itself included) that a user other than its owner may read,
/// write or enter, with its mode.
fn open_to_others(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut open = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue; // gone meanwhile (a WAL segment recycled)
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            open.push((path.clone(), mode));
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                todo.push(entry.path());
            }
        }
    }
    open
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_data_directory_outbox_backups_exports_and_restores_are_private_under_umask_022() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    succeeded(&mailroom(
        &app.data_dir,
        &["domain", "trust", "example.com", "--project", &p.id],
    ));
    let r = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.org", "from": "hello@example.com", "subject": "Hi", "body": "<p>Hi</p>"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let outbox = app.data_dir.join("outbox");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&outbox).map_or(true, |mut d| d.next().is_none()) {
        assert!(Instant::now() < deadline, "no .eml file in the outbox");
        std::thread::sleep(Duration::from_millis(25));
    }

    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("acme.mrb");
    succeeded(&mailroom(
        &app.data_dir,
        &["backup", "--out", file.to_str().unwrap()],
    ));
    assert_eq!(mode_of(&file), 0o600, "the backup");
    let export = tmp.path().join("acme.jsonl");
    succeeded(&mailroom(
        &app.data_dir,
        &[
            "project",
            "export",
            &p.id,
            "--out",
            export.to_str().unwrap(),
        ],
    ));
    assert_eq!(mode_of(&export), 0o600, "the export");
    assert_eq!(
        open_to_others(&app.data_dir),
        vec![],
        "the running server's data directory"
    );

    let restored = tmp.path().join("restored");
    succeeded(&mailroom_with(
        &app.data_dir,
        &[
            "restore",
            file.to_str().unwrap(),
            "--data",
            restored.to_str().unwrap(),
        ],
        |s| s.storage.backend = Backend::Sled,
    ));
    assert_eq!(open_to_others(&restored), vec![], "the restored directory");
}

#[test]
fn a_data_directory_an_older_version_left_open_is_narrowed_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _app = TestApp::start(data.clone(), |_| {});
    assert_eq!(mode_of(&data), 0o700);
}
