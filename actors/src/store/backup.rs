//! Backup files: a consistent snapshot of the whole store (`Store::snapshot`) as one
//! file, and a new data directory made from one.
//!
//! Layout, integers big-endian:
//! - header: `MAGIC` (16 bytes), the file format (u32), the key layout `keys::FORMAT`
//!   (u32), the creation time in Unix milliseconds (i64);
//! - records: `R`, key length (u32), value length (u32), key, value;
//! - trailer: `E`, the record count (u64), then the CRC-32 of every byte before it.
//!
//! A restore reads the file through once to check the trailer before it writes
//! anything, so a truncated or damaged file makes no data directory at all.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{keys, KvPair, SledConfig, SledStore, Store};
use crate::error::{Error, Result};

pub const MAGIC: &[u8; 16] = b"MAILROOM-BACKUP\0";
/// This file layout's version (not the key layout's: that is in the header too).
pub const FILE_FORMAT: u32 = 1;

const RECORD: u8 = b'R';
const END: u8 = b'E';
/// Bounds on one record's lengths, so a damaged length gives an error instead of an
/// allocation of gigabytes; far above anything the engine writes.
const MAX_KEY_BYTES: u32 = 64 * 1024;
const MAX_VALUE_BYTES: u32 = 256 * 1024 * 1024;
/// How often the progress callback is called while a file is written or read.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What a backup file says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub file_format: u32,
    pub key_format: u32,
    pub created_at_ms: i64,
}

/// Records and bytes so far, or in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub records: u64,
    pub bytes: u64,
}

/// Calls `report` at most once a `PROGRESS_EVERY`.
struct Ticker<'a> {
    report: &'a mut dyn FnMut(Tally),
    last: Instant,
}

impl Ticker<'_> {
    fn tick(&mut self, tally: Tally) {
        if tally.records.is_multiple_of(256) && self.last.elapsed() >= PROGRESS_EVERY {
            self.last = Instant::now();
            (self.report)(tally);
        }
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::storage_caused(context, e)
}

/// Writes a snapshot of `store` to `path`, through `<path>.partial` renamed into place
/// once synced, so `path` is never a half-written backup. Refuses an existing `path`.
pub fn write_file(
    store: &dyn Store,
    path: &Path,
    created_at_ms: i64,
    report: &mut dyn FnMut(Tally),
) -> Result<Tally> {
    if path.exists() {
        return Err(Error::conflict(format!(
            "{} already exists; a backup does not overwrite a file",
            path.display()
        )));
    }
    let partial = partial_path(path);
    let file = create_private(&partial).map_err(io(format!("creating {}", partial.display())))?;
    let result = (|| {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let tally = write(store.snapshot()?, created_at_ms, &mut out, report)?;
        let file = out.into_inner().map_err(|e| {
            Error::storage_caused(format!("writing {}", partial.display()), e.into_error())
        })?;
        file.sync_all()
            .map_err(io(format!("syncing {}", partial.display())))?;
        publish(&partial, path).map_err(io(format!("moving the backup to {}", path.display())))?;
        sync_parent(path);
        Ok(tally)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&partial);
    }
    result
}

/// A new file for a backup or an export (the store's whole content, or a project's
/// contacts): made by this call and no other (an existing file, or a link planted under
/// its name, is an error rather than written through or later removed), readable by its
/// owner alone.
pub fn create_private(path: &Path) -> std::io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Puts a whole `partial` file at `path`, which must not exist: a hard link, which
/// fails when a file (or a symbolic link an attacker planted) appeared at `path` since
/// it was checked, where a rename would silently replace it. Then `partial` goes.
pub fn publish(partial: &Path, path: &Path) -> std::io::Result<()> {
    fs::hard_link(partial, path)?;
    fs::remove_file(partial)
}

/// Narrows a directory this process made or uses to its owner alone (0700): the store
/// holds every contact and the link key.
pub fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// `<path>.partial`, where a file is written before it is renamed into place.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Makes a rename durable; a directory that cannot be opened (some file systems) only
/// loses that guarantee.
pub fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// Writes the header, every pair, and the trailer. `tally.bytes` counts the file.
pub fn write(
    pairs: impl Iterator<Item = Result<KvPair>>,
    created_at_ms: i64,
    out: &mut impl Write,
    report: &mut dyn FnMut(Tally),
) -> Result<Tally> {
    let mut w = Summing {
        out,
        crc: crc32fast::Hasher::new(),
        bytes: 0,
    };
    let failed = |e| Error::storage_caused("writing the backup", e);
    w.put(MAGIC).map_err(failed)?;
    w.put(&FILE_FORMAT.to_be_bytes()).map_err(failed)?;
    w.put(&keys::FORMAT.to_be_bytes()).map_err(failed)?;
    w.put(&created_at_ms.to_be_bytes()).map_err(failed)?;
    let mut ticker = Ticker {
        report,
        last: Instant::now(),
    };
    let mut records = 0u64;
    for kv in pairs {
        let (k, v) = kv?;
        let (klen, vlen) = (len(&k, MAX_KEY_BYTES)?, len(&v, MAX_VALUE_BYTES)?);
        w.put(&[RECORD]).map_err(failed)?;
        w.put(&klen.to_be_bytes()).map_err(failed)?;
        w.put(&vlen.to_be_bytes()).map_err(failed)?;
        w.put(&k).map_err(failed)?;
        w.put(&v).map_err(failed)?;
        records += 1;
        ticker.tick(Tally {
            records,
            bytes: w.bytes,
        });
    }
    w.put(&[END]).map_err(failed)?;
    w.put(&records.to_be_bytes()).map_err(failed)?;
    let crc = w.crc.clone().finalize();
    w.out.write_all(&crc.to_be_bytes()).map_err(failed)?;
    w.out.flush().map_err(failed)?;
    let tally = Tally {
        records,
        bytes: w.bytes + 4,
    };
    (ticker.report)(tally);
    Ok(tally)
}

fn len(bytes: &[u8], max: u32) -> Result<u32> {
    u32::try_from(bytes.len())
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(|| Error::storage(format!("a stored record of {} bytes", bytes.len())))
}

struct Summing<'a, W: Write> {
    out: &'a mut W,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl<W: Write> Summing<'_, W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.crc.update(b);
        self.bytes += b.len() as u64;
        self.out.write_all(b)
    }
}

/// Reads a backup: the header at once, then the records as an iterator that checks
/// the trailer (count and checksum) when it reaches it and fails if they disagree.
pub struct Reader<R: Read> {
    input: R,
    crc: crc32fast::Hasher,
    header: Header,
    tally: Tally,
    done: bool,
}

fn damaged(what: impl std::fmt::Display) -> Error {
    Error::storage(format!("the backup file is damaged or incomplete: {what}"))
}

impl<R: Read> Reader<R> {
    pub fn new(input: R) -> Result<Self> {
        let mut r = Reader {
            input,
            crc: crc32fast::Hasher::new(),
            header: Header {
                file_format: 0,
                key_format: 0,
                created_at_ms: 0,
            },
            tally: Tally::default(),
            done: false,
        };
        let magic: [u8; 16] = r.array()?;
        if &magic != MAGIC {
            return Err(Error::storage("not a Mailroom backup file (no header)"));
        }
        r.header.file_format = u32::from_be_bytes(r.array()?);
        if r.header.file_format != FILE_FORMAT {
            return Err(Error::storage(format!(
                "a backup file in format {}; this version reads format {FILE_FORMAT}",
                r.header.file_format
            )));
        }
        r.header.key_format = u32::from_be_bytes(r.array()?);
        r.header.created_at_ms = i64::from_be_bytes(r.array()?);
        Ok(r)
    }

    pub fn header(&self) -> Header {
        self.header
    }

    /// Records and bytes read so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        self.input.read_exact(buf).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => damaged("it ends early"),
            _ => Error::storage_caused("reading the backup file", e),
        })?;
        self.crc.update(buf);
        self.tally.bytes += buf.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    fn vec(&mut self, n: u32, max: u32) -> Result<Vec<u8>> {
        if n > max {
            return Err(damaged(format!("a record length of {n} bytes")));
        }
        let mut v = vec![0u8; n as usize];
        self.fill(&mut v)?;
        Ok(v)
    }

    fn record(&mut self) -> Result<Option<KvPair>> {
        match self.array::<1>()?[0] {
            RECORD => {
                let klen = u32::from_be_bytes(self.array()?);
                let vlen = u32::from_be_bytes(self.array()?);
                let k = self.vec(klen, MAX_KEY_BYTES)?;
                let v = self.vec(vlen, MAX_VALUE_BYTES)?;
                self.tally.records += 1;
                Ok(Some((k, v)))
            }
            END => {
                let count = u64::from_be_bytes(self.array()?);
                let expected = self.crc.clone().finalize();
                let mut sum = [0u8; 4];
                self.input
                    .read_exact(&mut sum)
                    .map_err(|_| damaged("its checksum is missing"))?;
                self.tally.bytes += 4;
                if count != self.tally.records {
                    return Err(damaged(format!(
                        "the trailer counts {count} records, the file holds {}",
                        self.tally.records
                    )));
                }
                if u32::from_be_bytes(sum) != expected {
                    return Err(damaged("its checksum does not match"));
                }
                let mut extra = [0u8; 1];
                if self
                    .input
                    .read(&mut extra)
                    .map_err(io("reading the backup file".into()))?
                    != 0
                {
                    return Err(damaged("bytes follow its trailer"));
                }
                Ok(None)
            }
            other => Err(damaged(format!("an unknown record tag {other}"))),
        }
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.record() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

fn open(file: &Path) -> Result<Reader<BufReader<File>>> {
    let f = File::open(file).map_err(io(format!("opening {}", file.display())))?;
    Reader::new(BufReader::with_capacity(1 << 20, f))
}

/// Reads a backup file through, checking its header, every record and its trailer.
pub fn verify(file: &Path, report: &mut dyn FnMut(Tally)) -> Result<(Header, Tally)> {
    let mut reader = open(file)?;
    let header = reader.header();
    if !(keys::OLDEST_UPGRADABLE..=keys::FORMAT).contains(&header.key_format) {
        return Err(Error::storage(format!(
            "the backup is in key layout {}; this version restores layouts {} to {} (restore \
             it with the version that made it)",
            header.key_format,
            keys::OLDEST_UPGRADABLE,
            keys::FORMAT
        )));
    }
    let mut ticker = Ticker {
        report,
        last: Instant::now(),
    };
    while let Some(kv) = reader.next() {
        kv?;
        ticker.tick(reader.tally());
    }
    Ok((header, reader.tally()))
}

/// A data directory made from a backup, and the store open on it.
pub struct Restored {
    pub header: Header,
    pub tally: Tally,
    /// The one handle on the new directory, from writing to migrating: a second open
    /// right after this one's drop could find sled's lock still held.
    pub store: Arc<SledStore>,
    /// The key layout the directory is in (the backup's).
    pub layout: u32,
}

/// Makes the data directory `dir` (absent or empty) from a backup file: checks the file
/// through first, then writes its records. On a failure nothing is left in `dir`. A
/// backup in an older key layout is restored as it is; `upgrade::upgrade` on the store
/// it hands back migrates it.
pub fn restore(
    file: &Path,
    dir: &Path,
    config: SledConfig,
    report: &mut dyn FnMut(Tally),
) -> Result<Restored> {
    let made = match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::conflict(format!(
                    "{} is not empty; a restore makes a new data directory",
                    dir.display()
                )));
            }
            false
        }
        Err(e) if e.kind() == ErrorKind::NotFound => true,
        Err(e) => {
            return Err(Error::storage_caused(
                format!("reading {}", dir.display()),
                e,
            ))
        }
    };
    let (header, tally) = verify(file, report)?;
    fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    make_private_dir(dir).map_err(io(format!("narrowing {} to 0700", dir.display())))?;
    let mut reader = open(file)?;
    let mut ticker = Ticker {
        report,
        last: Instant::now(),
    };
    let pairs = std::iter::from_fn(|| {
        let next = reader.next();
        ticker.tick(reader.tally());
        next
    });
    match SledStore::create_from(dir, config, header.key_format, pairs) {
        Ok((_, store, layout)) => Ok(Restored {
            header,
            tally,
            store,
            layout,
        }),
        Err(e) => {
            if made {
                let _ = fs::remove_dir_all(dir);
            } else if let Ok(entries) = fs::read_dir(dir) {
                for entry in entries.flatten() {
                    let _ =
                        fs::remove_dir_all(entry.path()).or_else(|_| fs::remove_file(entry.path()));
                }
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Batch;

    #[test]
    fn a_private_file_is_new_and_its_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.partial");
        drop(create_private(&path).unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(
            create_private(&path).is_err(),
            "an existing file is not taken"
        );
    }

    fn pairs(n: u32) -> Vec<KvPair> {
        (0..n)
            .map(|i| {
                (
                    format!("k/{i:04}").into_bytes(),
                    vec![i as u8; (i % 7) as usize],
                )
            })
            .collect()
    }

    fn file_of(p: &[KvPair]) -> Vec<u8> {
        let mut out = Vec::new();
        write(p.iter().cloned().map(Ok), 42, &mut out, &mut |_| {}).unwrap();
        out
    }

    #[test]
    fn a_written_file_reads_back_with_its_header_and_every_record() {
        let p = pairs(300);
        let bytes = file_of(&p);
        let mut r = Reader::new(bytes.as_slice()).unwrap();
        assert_eq!(r.header().created_at_ms, 42);
        assert_eq!(r.header().key_format, keys::FORMAT);
        let back: Vec<KvPair> = r.by_ref().collect::<Result<_>>().unwrap();
        assert_eq!(back, p);
        assert_eq!(r.tally().bytes, bytes.len() as u64);
    }

    #[test]
    fn a_flipped_byte_or_a_cut_file_is_refused() {
        let bytes = file_of(&pairs(50));
        let mut flipped = bytes.clone();
        flipped[100] ^= 1;
        let read_all = |b: &[u8]| -> Result<Vec<KvPair>> { Reader::new(b)?.collect() };
        assert!(read_all(&flipped).is_err(), "a flipped byte");
        assert!(
            read_all(&bytes[..bytes.len() - 1]).is_err(),
            "a cut trailer"
        );
        assert!(read_all(&bytes[..bytes.len() / 2]).is_err(), "half a file");
        assert!(read_all(&bytes).is_ok());
    }

    #[tokio::test]
    async fn a_snapshot_restores_into_an_empty_directory_and_refuses_a_full_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.mrb");
        {
            let s = SledStore::open(&dir.path().join("live"), SledConfig::default()).unwrap();
            let mut b = Batch::new();
            for (k, v) in pairs(20) {
                b.put(k, v);
            }
            s.apply(b).unwrap();
            s.durable().await.unwrap();
            // Applied but not yet synced: visible, so in the snapshot too.
            let mut b = Batch::new();
            b.put(b"late".to_vec(), b"v".to_vec());
            s.apply(b).unwrap();
            let tally = write_file(&*s, &file, 7, &mut |_| {}).unwrap();
            assert_eq!(tally.records, 22, "20 pairs, `late` and the layout mark");
        }
        let target = dir.path().join("restored");
        let s = restore(&file, &target, SledConfig::default(), &mut |_| {})
            .unwrap()
            .store;
        assert_eq!(s.scan(b"k/", None, false).count(), 20);
        assert_eq!(s.get(b"late").unwrap(), Some(b"v".to_vec()));
        let again = restore(&file, &target, SledConfig::default(), &mut |_| {}).map(|_| ());
        assert!(matches!(again, Err(Error::Conflict { .. })), "{again:?}");
    }

    #[tokio::test]
    async fn a_snapshot_holds_still_while_writes_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), SledConfig::default()).unwrap();
        let put = |k: &str| {
            let mut b = Batch::new();
            b.put(k.as_bytes().to_vec(), b"v".to_vec());
            s.apply(b).unwrap();
        };
        put("a/1");
        s.durable().await.unwrap();
        let mut snap = s.snapshot().unwrap();
        let first = snap.next().unwrap().unwrap();
        // Between `a/1` and the layout mark: a walk that saw them would yield them.
        for i in 2..50 {
            put(&format!("b/{i:02}"));
        }
        s.durable().await.unwrap();
        let rest: Vec<Vec<u8>> = snap.map(|kv| kv.unwrap().0).collect();
        assert_eq!(first.0, b"a/1");
        assert_eq!(rest, [keys::FORMAT_KEY.to_vec()], "no later write shows");
        assert_eq!(s.scan(b"b/", None, false).count(), 48, "and none was lost");
    }

    /// A measurement, not a check: `cargo test -p mailroom-actors --release -- --ignored
    /// backup_and_restore_of_200k_pairs --nocapture`.
    #[tokio::test]
    #[ignore = "a measurement: cargo test -p mailroom-actors --release -- --ignored backup_and_restore_of_200k_pairs --nocapture"]
    async fn backup_and_restore_of_200k_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(&dir.path().join("live"), SledConfig::default()).unwrap();
        for chunk in 0..200u32 {
            let mut b = Batch::new();
            for i in 0..1000u32 {
                b.put(format!("k/{chunk:04}/{i:04}").into_bytes(), vec![7u8; 100]);
            }
            s.apply(b).unwrap();
        }
        s.durable().await.unwrap();
        let file = dir.path().join("b.mrb");
        let started = Instant::now();
        let t = write_file(&*s, &file, 0, &mut |_| {}).unwrap();
        let backup = started.elapsed();
        let started = Instant::now();
        restore(
            &file,
            &dir.path().join("r"),
            SledConfig::default(),
            &mut |_| {},
        )
        .unwrap();
        println!(
            "{} pairs, {} bytes: backup {backup:?}, restore {:?}",
            t.records,
            t.bytes,
            started.elapsed()
        );
    }
}
