//! A test that cannot run here says so through [`skipped`], never by passing in silence.
//!
//! Besides the message on stderr (which the harness shows only with `--nocapture`), each
//! skip is appended to the file named by `MAILROOM_SKIP_LOG` as `test name<TAB>why`. `.ci/run`
//! sets it for every pass and counts a test as skipped when it skipped on one pass and
//! passed on none (a PostgreSQL test skips on the sled pass and runs on the PostgreSQL
//! pass; a test of sled's own files the other way round). CI fails on any such skip.

use std::io::Write;

/// Says that the running test is skipped and why; returns nothing for the caller to check,
/// who then returns from the test.
pub fn skipped(why: &str) {
    eprintln!("skipped: {why}");
    let Some(log) = std::env::var_os("MAILROOM_SKIP_LOG") else {
        return;
    };
    // The harness names each test's thread after the test.
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("(unnamed test)");
    let line = format!("{name}\t{}\n", why.replace(['\n', '\t'], " "));
    // One small append per skip: lines from tests running at once do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record the skip in MAILROOM_SKIP_LOG ({log:?}): {e}");
    }
}
