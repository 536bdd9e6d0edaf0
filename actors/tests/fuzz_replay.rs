//! The stable-toolchain pass of the fuzz targets in `fuzz/` (docs/testing.md, "Fuzzing"). For
//! each target, every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`
//! is replayed through `mailroom_actors::fuzzing::<target>`; then the target runs over
//! inputs mutated from those files (bits flipped, bytes set, inserted and removed,
//! truncations, pieces of another file, random bytes) by a small deterministic
//! generator, for at most `MAX_INPUTS` inputs or `BUDGET`, whichever comes first.
//!
//! A crash that `cargo fuzz` finds is kept as a file under `fuzz/regressions/<target>/`,
//! and so is replayed here from then on.
//!
//! `FUZZ_REPLAY_SECS` sets the time for mutated inputs per target (0: the files only),
//! `FUZZ_REPLAY_SEED` the generator's seed, and `FUZZ_REPLAY_VERBOSE=1` prints each
//! input before it runs: a crash that aborts the process (a failed allocation) cannot be
//! caught, so the last input printed is the one.

use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mailroom_actors::fuzzing;

/// Mutated inputs per target, at most.
const MAX_INPUTS: usize = 5_000;
/// Time per target for mutated inputs, at most (the files are always replayed).
const BUDGET: Duration = Duration::from_secs(3);
/// Mutated inputs are cut to this length.
const MAX_LEN: usize = 16 << 10;
/// Bytes that mean something to the targets' formats: the extremes, bincode's markers
/// of wide integers (251 to 254), a UUID's length (16), and JSON, template and address
/// punctuation.
const INTERESTING: &[u8] = b"\x00\x01\x02\x0f\x10\x7f\x80\xfb\xfc\xfd\xfe\xff{}[]\",:\\%|#@.-+ \n";

type Target = fn(&[u8]);

#[test]
fn filter() {
    run("filter", fuzzing::filter);
}

#[test]
fn template() {
    run("template", fuzzing::template);
}

#[test]
fn email() {
    run("email", fuzzing::email);
}

#[test]
fn wal() {
    run("wal", fuzzing::wal);
}

#[test]
fn records() {
    run("records", fuzzing::records);
}

#[test]
fn reports() {
    run("reports", fuzzing::reports);
}

fn run(name: &str, target: Target) {
    let files = files(name);
    for (path, bytes) in &files {
        one(name, target, bytes, &path.display().to_string());
    }
    let seeds: Vec<Vec<u8>> = files.into_iter().map(|(_, bytes)| bytes).collect();
    let mut rng = Rng::new(seed(name));
    let (started, limit) = (Instant::now(), budget());
    let mut ran = 0;
    while ran < MAX_INPUTS && started.elapsed() < limit {
        let input = mutate(&mut rng, &seeds);
        one(name, target, &input, &format!("mutated input {ran}"));
        ran += 1;
    }
    // Straight to stderr, past the test harness's capture, so that CI logs show it.
    let _ = writeln!(
        std::io::stderr(),
        "fuzz_replay {name}: {} files and {ran} mutated inputs ({:.1?})",
        seeds.len(),
        started.elapsed()
    );
}

/// Runs one input. A panic fails the test with the input's bytes, to keep as a file
/// under `fuzz/regressions/<target>/`.
fn one(name: &str, target: Target, input: &[u8], origin: &str) {
    if std::env::var_os("FUZZ_REPLAY_VERBOSE").is_some() {
        let _ = writeln!(
            std::io::stderr(),
            "fuzz_replay {name}: {origin}: b\"{}\"",
            input.escape_ascii()
        );
    }
    if panic::catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
        panic!(
            "the fuzz target `{name}` panicked on {origin} ({} bytes): b\"{}\"\n\
             keep it as a file under fuzz/regressions/{name}/",
            input.len(),
            input.escape_ascii()
        );
    }
}

/// The target's corpus files, then its regression files, each in name order.
fn files(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut files = read_dir(&fuzz.join("corpus").join(name));
    assert!(
        !files.is_empty(),
        "fuzz/corpus/{name}/ holds no seed files to start from"
    );
    files.extend(read_dir(&fuzz.join("regressions").join(name)));
    files
}

/// The files of `dir` but hidden ones (none when it does not exist), in name order.
fn read_dir(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let bytes =
                std::fs::read(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

fn budget() -> Duration {
    std::env::var("FUZZ_REPLAY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(BUDGET, Duration::from_secs)
}

/// The generator's seed for a target: FNV-1a of its name over the base seed, so that
/// each target gets its own sequence.
fn seed(name: &str) -> u64 {
    let base = std::env::var("FUZZ_REPLAY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xcbf2_9ce4_8422_2325);
    name.bytes().fold(base, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One input: a seed file changed one to four times, or (one time in eight) random
/// bytes.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(8) == 0 {
        let len = rng.below(64);
        return (0..len).map(|_| rng.byte()).collect();
    }
    let mut input = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let other = &seeds[rng.below(seeds.len())];
        change(rng, &mut input, other);
    }
    input.truncate(MAX_LEN);
    input
}

fn change(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    let at = rng.below(input.len() + 1);
    match rng.below(7) {
        0 if at < input.len() => input[at] ^= 1u8 << rng.below(8),
        1 if at < input.len() => input[at] = INTERESTING[rng.below(INTERESTING.len())],
        2 => {
            let bytes: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.byte()).collect();
            insert(input, at, &bytes);
        }
        3 => {
            let end = (at + 1 + rng.below(8)).min(input.len());
            let tail = input.split_off(end);
            input.truncate(at);
            input.extend_from_slice(&tail);
        }
        4 => input.truncate(at),
        5 => {
            // A piece of another file (a splice).
            let from = rng.below(other.len() + 1);
            let to = (from + rng.below(64)).min(other.len());
            insert(input, at, &other[from..to]);
        }
        _ => {
            // A piece of this input, repeated.
            let end = (at + 1 + rng.below(16)).min(input.len());
            let piece = input[at..end].to_vec();
            insert(input, at, &piece);
        }
    }
}

fn insert(input: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    let tail = input.split_off(at);
    input.extend_from_slice(bytes);
    input.extend_from_slice(&tail);
}

/// xorshift64: deterministic, and good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // The state must never be zero.
        Rng(seed | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
}
