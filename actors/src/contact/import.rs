//! Bulk contact imports from CSV. The upload is kept whole in the store (`keys::import_chunk`)
//! with a record (`keys::import`) whose cursor is the CSV byte offset where the next slice
//! starts. A slice's contacts and the cursor past them are written in one batch, so an
//! import that a crash interrupts resumes at the first row it had not applied, and no row
//! is applied twice.

use std::collections::HashSet;
use std::io::Read;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::records::{self as contacts, Change, ProjectCounts};
use crate::error::{Error, FieldCode, Result};
use crate::model::{DataMap, DataPatch, EmailAddress, ImportId, ProjectId, Timestamp};
use crate::project::write::WriteCtx;
use crate::store::{codec, keys, Batch, Store};

/// Bytes of CSV per stored chunk: a slice reads one or two chunks, not the whole file.
const CHUNK_BYTES: usize = 1 << 20;

/// The rejected rows a record lists; past this it only counts them, so a file of bad
/// rows cannot grow the record without bound.
pub const MAX_LISTED_REJECTS: usize = 1000;

/// The most columns a header may have: every row is read against each of them, and a
/// contact's data is bounded far below this many keys anyway.
pub const MAX_COLUMNS: usize = 1000;

/// The most characters a rejected row keeps of its email cell and of its reason (which
/// may quote a cell): a row of megabytes is listed, not stored whole.
const MAX_REJECTED_TEXT: usize = 320;

/// `text` cut to `MAX_REJECTED_TEXT` characters.
fn clipped(text: String) -> String {
    match text.char_indices().nth(MAX_REJECTED_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImportStatus {
    Queued,
    Running,
    Completed,
    Failed,
}

impl ImportStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ImportStatus::Queued => "QUEUED",
            ImportStatus::Running => "RUNNING",
            ImportStatus::Completed => "COMPLETED",
            ImportStatus::Failed => "FAILED",
        }
    }

    pub fn is_over(self) -> bool {
        matches!(self, ImportStatus::Completed | ImportStatus::Failed)
    }
}

/// A row the import did not apply, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// The CSV line the row starts on (the header is line 1).
    pub line: u64,
    pub email: Option<String>,
    pub reason: String,
}

/// Where the next slice starts: a byte offset in the CSV and the line it is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Cursor {
    pub byte: u64,
    pub line: u64,
}

/// What a value in a data column becomes, by the header's suffix (`age:number`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    String,
    Number,
    Boolean,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Column {
    Email,
    Subscribed,
    /// A JSON object merged into `data` (the column the export writes).
    Data,
    /// A column the export writes that an import does not set (`createdAt`).
    Ignored,
    Field {
        key: String,
        kind: Kind,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Import {
    pub id: ImportId,
    pub status: ImportStatus,
    /// Data rows in the file (the header left out).
    pub rows: u64,
    pub processed: u64,
    pub created: u64,
    pub updated: u64,
    pub rejected: Vec<Rejected>,
    /// Rejected rows past the first `MAX_LISTED_REJECTS`.
    pub rejected_unlisted: u64,
    pub chunks: u32,
    pub columns: Vec<Column>,
    pub cursor: Cursor,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub error: Option<String>,
}

impl Import {
    /// Erasure of a contact: every rejected row whose email cell or reason names
    /// `email` (in any case, as a whole address: `a@b.co` is not in `xa@b.com`) loses
    /// both. True when a row changed.
    pub fn erase_rejected(&mut self, email: &str) -> bool {
        let needle = email.to_lowercase();
        let names = |text: &str| names_address(&text.to_lowercase(), &needle);
        let mut changed = false;
        for r in &mut self.rejected {
            if r.email.as_deref().is_some_and(names) || names(&r.reason) {
                r.email = None;
                r.reason = super::erasure_record::ERASED_ERROR.to_owned();
                changed = true;
            }
        }
        changed
    }

    fn reject(&mut self, r: Rejected) {
        if self.rejected.len() < MAX_LISTED_REJECTS {
            self.rejected.push(Rejected {
                email: r.email.map(clipped),
                reason: clipped(r.reason),
                ..r
            });
        } else {
            self.rejected_unlisted += 1;
        }
    }
}

/// Whether `text` holds `address` with no address character joined to either end.
fn names_address(text: &str, address: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || "._%+-@".contains(c);
    !address.is_empty()
        && text.match_indices(address).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + address.len()..].chars().next();
            !before.is_some_and(part) && !after.is_some_and(part)
        })
}

/// One contact row, parsed.
#[derive(Debug, Clone)]
pub struct Row {
    pub line: u64,
    pub email: EmailAddress,
    pub subscribed: Option<bool>,
    pub data: DataMap,
}

/// The rows between two cursors.
#[derive(Debug)]
pub struct Slice {
    pub from: Cursor,
    pub to: Cursor,
    pub rows: Vec<Row>,
    pub rejected: Vec<Rejected>,
    pub done: bool,
}

fn header_error(message: impl Into<String>) -> Error {
    Error::field("header", FieldCode::Custom, message)
}

/// The header row's columns: `email` (required), `subscribed`, `data` (a JSON object),
/// `createdAt`/`updatedAt`/`id` (ignored), and any other name a data key, typed by a
/// `:string`, `:number` or `:boolean` suffix (string when there is none).
pub fn columns(header: &csv::StringRecord) -> Result<Vec<Column>> {
    if header.len() > MAX_COLUMNS {
        return Err(header_error(format!(
            "The header row has {} columns; at most {MAX_COLUMNS} are read",
            header.len()
        )));
    }
    let mut out = Vec::with_capacity(header.len());
    let mut seen = HashSet::new();
    let mut columns_seen = HashSet::new();
    for raw in header.iter() {
        let name = raw.trim();
        if !seen.insert(name.to_owned()) {
            return Err(header_error(format!("The column {name:?} appears twice")));
        }
        let column = match name.to_ascii_lowercase().as_str() {
            "email" => Column::Email,
            "subscribed" => Column::Subscribed,
            "data" => Column::Data,
            "createdat" | "updatedat" | "id" => Column::Ignored,
            _ => {
                let (key, kind) = match name.rsplit_once(':') {
                    Some((key, "string")) => (key, Kind::String),
                    Some((key, "number")) => (key, Kind::Number),
                    Some((key, "boolean")) => (key, Kind::Boolean),
                    Some((_, other)) => {
                        return Err(Error::field(
                            "header",
                            FieldCode::InvalidEnumValue,
                            format!(
                                "The column {name:?} has the type {other:?}; a type is string, number or boolean"
                            ),
                        ))
                    }
                    None => (name, Kind::String),
                };
                if key.is_empty() {
                    return Err(header_error("A column has no name"));
                }
                Column::Field {
                    key: key.to_owned(),
                    kind,
                }
            }
        };
        if column != Column::Ignored && !columns_seen.insert(column.clone()) {
            return Err(header_error(format!("The column {name:?} appears twice")));
        }
        out.push(column);
    }
    near_missed_column(header, &out)?;
    if !out.contains(&Column::Email) {
        return Err(header_error("The header row has no email column"));
    }
    Ok(out)
}

/// A column that is a near miss of a known column the header lacks (`emial`,
/// `subscibed`) would otherwise become a data key without a word, and the import would
/// fail on every row or keep nobody's flag. `data` and `id` are left out: two-letter and
/// four-letter names are too close to ordinary data keys (`date`, `ip`).
fn near_missed_column(header: &csv::StringRecord, columns: &[Column]) -> Result<()> {
    let missing: Vec<&str> = [("email", Column::Email), ("subscribed", Column::Subscribed)]
        .into_iter()
        .filter(|(_, c)| !columns.contains(c))
        .map(|(name, _)| name)
        .collect();
    for raw in header.iter() {
        let name = raw.trim();
        let key = name.rsplit_once(':').map_or(name, |(k, _)| k);
        if let Some(meant) = crate::near_miss::meant(key, &missing) {
            return Err(Error::field(
                "header",
                FieldCode::UnrecognizedKeys,
                format!("unknown column {name:?}; did you mean `{meant}`?"),
            ));
        }
    }
    Ok(())
}

fn reader<R: Read>(r: R) -> csv::Reader<R> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(r)
}

/// Checks the header, counts the rows and stores the file with a QUEUED record, in one
/// batch. The caller waits for it to be durable before answering.
pub fn create(store: &dyn Store, p: ProjectId, csv: &[u8], now: Timestamp) -> Result<Import> {
    let csv = csv.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(csv);
    let mut rd = reader(csv);
    let mut header = csv::StringRecord::new();
    let has_header = rd
        .read_record(&mut header)
        .map_err(|e| header_error(format!("The header row is not valid CSV: {e}")))?;
    if !has_header {
        return Err(Error::field(
            "header",
            FieldCode::TooSmall,
            "The file is empty; a header row is expected",
        ));
    }
    let columns = columns(&header)?;
    let start = rd.position().clone();
    let mut rows = 0u64;
    let mut rec = csv::ByteRecord::new();
    // A malformed row is rejected when its slice is read; here it only counts.
    loop {
        match rd.read_byte_record(&mut rec) {
            Ok(true) => rows += 1,
            Ok(false) => break,
            Err(e) => {
                return Err(Error::field(
                    "body",
                    FieldCode::Custom,
                    format!("The file cannot be read as CSV after row {rows}: {e}"),
                ))
            }
        }
    }
    let id = ImportId::new();
    let chunks: Vec<&[u8]> = csv.chunks(CHUNK_BYTES).collect();
    let import = Import {
        id,
        status: ImportStatus::Queued,
        rows,
        processed: 0,
        created: 0,
        updated: 0,
        rejected: Vec::new(),
        rejected_unlisted: 0,
        chunks: u32::try_from(chunks.len())
            .map_err(|_| Error::Internal("too many chunks".into()))?,
        columns,
        cursor: Cursor {
            byte: start.byte(),
            line: start.line(),
        },
        created_at: now.millis(),
        finished_at: None,
        error: None,
    };
    let mut batch = Batch::new();
    for (n, chunk) in (0u32..).zip(&chunks) {
        batch.put(keys::import_chunk(p, id, n), chunk.to_vec());
    }
    batch.put(keys::import(p, id), codec::encode(&import)?);
    store.apply(batch)?;
    Ok(import)
}

/// The project's imports not yet over (QUEUED or RUNNING).
pub fn unfinished(store: &dyn Store, p: ProjectId) -> Result<u64> {
    let mut n = 0;
    for kv in store.scan(&keys::imports_of(p), None, false) {
        let (_, v) = kv?;
        if !codec::decode::<Import>(&v)?.status.is_over() {
            n += 1;
        }
    }
    Ok(n)
}

pub fn load(store: &dyn Store, p: ProjectId, id: ImportId) -> Result<Option<Import>> {
    store
        .get(&keys::import(p, id))?
        .map(|b| codec::decode(&b))
        .transpose()
}

/// The stored CSV from a byte offset on, a chunk at a time.
struct Chunks<'a> {
    store: &'a dyn Store,
    p: ProjectId,
    id: ImportId,
    next: u32,
    total: u32,
    buf: Vec<u8>,
    at: usize,
}

impl<'a> Chunks<'a> {
    fn at(store: &'a dyn Store, p: ProjectId, import: &Import, byte: u64) -> Self {
        let first = (byte / CHUNK_BYTES as u64) as u32;
        Chunks {
            store,
            p,
            id: import.id,
            next: first,
            total: import.chunks,
            buf: Vec::new(),
            at: (byte % CHUNK_BYTES as u64) as usize,
        }
    }
}

impl Read for Chunks<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.buf.len() && self.next < self.total {
            let skip = if self.buf.is_empty() { self.at } else { 0 };
            let chunk = self
                .store
                .get(&keys::import_chunk(self.p, self.id, self.next))
                .map_err(std::io::Error::other)?
                .ok_or_else(|| std::io::Error::other("a chunk of the import is missing"))?;
            self.buf = chunk;
            self.at = skip;
            self.next += 1;
        }
        let rest = self.buf.get(self.at..).unwrap_or_default();
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

/// Reads up to `max_rows` rows from the import's cursor. A slice stops before a second
/// row of an email it holds already: its rows are written in one batch, which cannot
/// read its own writes.
pub fn read_slice(
    store: &dyn Store,
    p: ProjectId,
    import: &Import,
    max_rows: usize,
) -> Result<Slice> {
    let from = import.cursor;
    let mut rd = reader(Chunks::at(store, p, import, from.byte));
    let mut slice = Slice {
        from,
        to: from,
        rows: Vec::new(),
        rejected: Vec::new(),
        done: false,
    };
    let mut emails = HashSet::new();
    let mut rec = csv::ByteRecord::new();
    let absolute = |pos: &csv::Position| Cursor {
        byte: from.byte + pos.byte(),
        line: from.line + pos.line() - 1,
    };
    while slice.rows.len() + slice.rejected.len() < max_rows {
        let before = absolute(rd.position());
        let more = rd
            .read_byte_record(&mut rec)
            .map_err(|e| Error::storage(format!("reading the import: {e}")))?;
        if !more {
            slice.done = true;
            slice.to = before;
            break;
        }
        let line = rec.position().map_or(before.line, |pos| absolute(pos).line);
        match row(&import.columns, &rec, line) {
            Ok(r) => {
                if !emails.insert(r.email.as_str().to_owned()) {
                    slice.to = before;
                    return Ok(slice);
                }
                slice.rows.push(r);
            }
            Err(r) => slice.rejected.push(r),
        }
        slice.to = absolute(rd.position());
    }
    Ok(slice)
}

/// The characters that make a spreadsheet read a cell as a formula, and the quote that
/// guards them (OWASP's CSV injection advice). An address may start with `=`, `+` or `-`,
/// and anyone with the public key can create a contact, so an export must not hand the
/// operator's spreadsheet a formula.
const FORMULA_START: [char; 5] = ['=', '+', '-', '@', '\''];

/// A cell as an export writes it: with a leading `'` when it starts like a formula (or with
/// `'` itself, so that `unguarded` can undo exactly what this did).
pub fn guarded(cell: &str) -> std::borrow::Cow<'_, str> {
    if cell.starts_with(FORMULA_START) {
        std::borrow::Cow::Owned(format!("'{cell}"))
    } else {
        std::borrow::Cow::Borrowed(cell)
    }
}

/// A cell as an import reads it: one guarding `'` removed, so an export imports back as
/// the same address.
pub fn unguarded(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.starts_with(FORMULA_START) => rest,
        _ => cell,
    }
}

/// One record as a contact row, or why it is rejected.
pub fn row(
    columns: &[Column],
    rec: &csv::ByteRecord,
    line: u64,
) -> std::result::Result<Row, Rejected> {
    let mut email = None;
    let mut subscribed = None;
    let mut data = DataMap::new();
    let mut reasons: Vec<String> = Vec::new();
    if rec.len() > columns.len() {
        reasons.push(format!(
            "the row has {} fields; the header has {}",
            rec.len(),
            columns.len()
        ));
    }
    for (column, raw) in columns.iter().zip(rec.iter()) {
        let Ok(text) = std::str::from_utf8(raw) else {
            reasons.push("the row is not valid UTF-8".into());
            break;
        };
        let value = text.trim();
        match column {
            Column::Email => email = Some(unguarded(value).to_owned()),
            Column::Ignored => {}
            _ if value.is_empty() => {}
            Column::Subscribed => match boolean(value) {
                Some(b) => subscribed = Some(b),
                None => reasons.push(format!("subscribed must be true or false, not {value:?}")),
            },
            Column::Data => match serde_json::from_str::<Value>(value) {
                Ok(Value::Object(map)) => data.extend(map),
                _ => reasons.push("data must be a JSON object".into()),
            },
            Column::Field { key, kind } => match typed(value, *kind) {
                Some(v) => {
                    data.insert(key.clone(), v);
                }
                None => reasons.push(format!(
                    "{key} must be a {}, not {value:?}",
                    match kind {
                        Kind::Number => "number",
                        Kind::Boolean => "boolean (true or false)",
                        Kind::String => "string",
                    }
                )),
            },
        }
    }
    let email = email.filter(|e| !e.is_empty());
    let parsed = match &email {
        None => {
            reasons.insert(0, "email is missing".into());
            None
        }
        Some(e) => match EmailAddress::parse(e) {
            Ok(a) => Some(a),
            Err(err) => {
                reasons.insert(0, format!("email is not a valid address: {err}"));
                None
            }
        },
    };
    match parsed {
        Some(email) if reasons.is_empty() => Ok(Row {
            line,
            email,
            subscribed,
            data,
        }),
        _ => Err(Rejected {
            line,
            email,
            reason: reasons.join("; "),
        }),
    }
}

fn boolean(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

fn typed(s: &str, kind: Kind) -> Option<Value> {
    match kind {
        Kind::String => Some(Value::String(s.to_owned())),
        Kind::Boolean => boolean(s).map(Value::Bool),
        Kind::Number => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Number(_)) => Some(v),
            _ => None,
        },
    }
}

/// Why a row the engine refused was rejected, in words.
fn reason(e: &Error) -> String {
    match e {
        Error::Validation(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

/// Applies a slice in the project's actor: its contacts through the upsert path, its
/// rejections and the cursor past it, in one batch. A slice whose start is not the
/// record's cursor was applied already (or the import ended): nothing is written.
pub fn apply(
    ctx: &WriteCtx,
    counts: &mut ProjectCounts,
    id: ImportId,
    slice: Slice,
) -> Result<Import> {
    let p = ctx.project;
    let mut import =
        load(ctx.store, p, id)?.ok_or_else(|| Error::storage("import record missing"))?;
    if import.status.is_over() || import.cursor != slice.from {
        return Ok(import);
    }
    let mut running = *counts;
    let mut changes: Vec<Change> = Vec::with_capacity(slice.rows.len());
    let mut rejected = slice.rejected;
    for row in slice.rows {
        let data = DataPatch::new(row.data);
        match contacts::prepare_upsert(ctx, running, &row.email, row.subscribed, true, &data) {
            Ok(change) => {
                running = change.counts;
                changes.push(change);
            }
            // A limit refuses the row; anything else (the store) stops the slice.
            Err(e @ (Error::Validation(_) | Error::Conflict { .. })) => rejected.push(Rejected {
                line: row.line,
                email: Some(row.email.to_string()),
                reason: reason(&e),
            }),
            Err(e) => return Err(e),
        }
    }
    rejected.sort_by_key(|r| r.line);
    let created = changes.iter().filter(|c| c.is_new()).count() as u64;
    import.created += created;
    import.updated += changes.len() as u64 - created;
    import.processed += (changes.len() + rejected.len()) as u64;
    for r in rejected {
        import.reject(r);
    }
    import.cursor = slice.to;
    import.status = ImportStatus::Running;
    let mut batch = Batch::new();
    if slice.done {
        import.status = ImportStatus::Completed;
        import.finished_at = Some(ctx.now.millis());
        drop_chunks(&mut batch, p, &import);
    }
    batch.put(keys::import(p, id), codec::encode(&import)?);
    contacts::commit_all(ctx, &changes, batch)?;
    *counts = running;
    Ok(import)
}

/// Ends an import that cannot go on (its stored file is unreadable).
pub fn fail(
    store: &dyn Store,
    p: ProjectId,
    id: ImportId,
    why: &str,
    now: Timestamp,
) -> Result<()> {
    let Some(mut import) = load(store, p, id)? else {
        return Ok(());
    };
    if import.status.is_over() {
        return Ok(());
    }
    import.status = ImportStatus::Failed;
    import.error = Some(why.to_owned());
    import.finished_at = Some(now.millis());
    let mut batch = Batch::new();
    drop_chunks(&mut batch, p, &import);
    batch.put(keys::import(p, id), codec::encode(&import)?);
    store.apply(batch).map(drop)
}

fn drop_chunks(batch: &mut Batch, p: ProjectId, import: &Import) {
    for n in 0..import.chunks {
        batch.delete(keys::import_chunk(p, import.id, n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erasure_takes_rejected_rows_that_name_the_whole_address_only() {
        let row = |email: &str, reason: &str| Rejected {
            line: 2,
            email: Some(email.to_owned()),
            reason: reason.to_owned(),
        };
        let mut import = Import {
            id: ImportId::new(),
            status: ImportStatus::Completed,
            rows: 3,
            processed: 3,
            created: 0,
            updated: 0,
            rejected: vec![
                row("A@B.co", "age: not a number"),
                row("xa@b.com", "limit"),
                row("", "duplicate of a@b.co on line 2"),
            ],
            rejected_unlisted: 0,
            chunks: 0,
            columns: vec![],
            cursor: Cursor::default(),
            created_at: 0,
            finished_at: None,
            error: None,
        };
        assert!(import.erase_rejected("a@b.co"));
        assert_eq!(import.rejected[0].email, None);
        assert_eq!(import.rejected[1].email.as_deref(), Some("xa@b.com"));
        assert_eq!(
            import.rejected[2].reason,
            super::super::erasure_record::ERASED_ERROR
        );
    }

    fn header(names: &[&str]) -> Result<Vec<Column>> {
        columns(&csv::StringRecord::from(names.to_vec()))
    }

    fn record(fields: &[&str]) -> csv::ByteRecord {
        csv::ByteRecord::from(fields.to_vec())
    }

    #[test]
    fn a_header_types_data_columns_by_their_suffix() {
        let cols = header(&["email", "age:number", "vip:boolean", "plan", "note:string"]).unwrap();
        let kinds: Vec<Option<Kind>> = cols
            .iter()
            .map(|c| match c {
                Column::Field { kind, .. } => Some(*kind),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                None,
                Some(Kind::Number),
                Some(Kind::Boolean),
                Some(Kind::String),
                Some(Kind::String)
            ]
        );
    }

    #[test]
    fn a_formula_like_address_is_guarded_on_export_and_read_back_unchanged() {
        for email in [
            "=1+2@x.com",
            "-a@x.com",
            "+a@x.com",
            "'a@x.com",
            "''=a@x.com",
            "a@x.com",
        ] {
            let cell = guarded(email);
            assert!(!cell.starts_with(['=', '+', '-', '@']), "{cell}");
            assert_eq!(unguarded(&cell), email);
        }
        assert_eq!(guarded("a@x.com"), "a@x.com");
    }

    #[test]
    fn a_near_miss_of_a_missing_column_is_refused_with_the_column_it_meant() {
        let err = format!("{:?}", header(&["emial", "plan"]).unwrap_err());
        assert!(err.contains("did you mean `email`"), "{err}");
        let err = format!("{:?}", header(&["email", "Subscibed"]).unwrap_err());
        assert!(err.contains("did you mean `subscribed`"), "{err}");
        // Ordinary data keys near `data` or `id`, and a second address column beside
        // `email`, stay data keys.
        assert!(header(&["email", "date", "ip", "emails"]).is_ok());
    }

    #[test]
    fn a_header_without_email_an_unknown_type_or_a_repeated_column_is_refused() {
        assert!(header(&["name"]).is_err());
        assert!(header(&["email", "age:float"]).is_err());
        assert!(header(&["email", "plan", "plan"]).is_err());
        assert!(header(&["email", "Email"]).is_err());
        assert!(header(&["email", ":number"]).is_err());
    }

    #[test]
    fn a_header_of_too_many_columns_is_refused_and_one_at_the_bound_is_read() {
        let names: Vec<String> = std::iter::once("email".to_owned())
            .chain((1..MAX_COLUMNS).map(|i| format!("k{i}")))
            .collect();
        let at_bound: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(header(&at_bound).unwrap().len(), MAX_COLUMNS);
        let mut over = at_bound.clone();
        over.push("one_more");
        assert!(header(&over).is_err());
    }

    #[test]
    fn a_rejected_row_keeps_a_bounded_part_of_its_cells() {
        let mut import = Import {
            id: ImportId::new(),
            status: ImportStatus::Running,
            rows: 1,
            processed: 0,
            created: 0,
            updated: 0,
            rejected: Vec::new(),
            rejected_unlisted: 0,
            chunks: 0,
            columns: Vec::new(),
            cursor: Cursor::default(),
            created_at: 0,
            finished_at: None,
            error: None,
        };
        import.reject(Rejected {
            line: 2,
            email: Some("x".repeat(100_000)),
            reason: format!("not an address: {:?}", "y".repeat(100_000)),
        });
        let r = &import.rejected[0];
        assert_eq!(r.line, 2);
        assert!(r.email.as_ref().unwrap().chars().count() <= MAX_REJECTED_TEXT + 1);
        assert!(r.reason.starts_with("not an address"));
        assert!(r.reason.chars().count() <= MAX_REJECTED_TEXT + 1);
    }

    #[test]
    fn a_row_becomes_typed_data_and_empty_cells_leave_keys_alone() {
        let cols = header(&[
            "email",
            "subscribed",
            "age:number",
            "vip:boolean",
            "plan",
            "data",
        ])
        .unwrap();
        let row = row(
            &cols,
            &record(&[
                " Ann@Example.com ",
                "FALSE",
                "31.5",
                "1",
                "",
                r#"{"city":"Oslo"}"#,
            ]),
            2,
        )
        .unwrap();
        assert_eq!(row.email.as_str(), "ann@example.com");
        assert_eq!(row.subscribed, Some(false));
        assert_eq!(
            Value::Object(row.data),
            serde_json::json!({"age": 31.5, "vip": true, "city": "Oslo"})
        );
    }

    #[test]
    fn a_bad_row_is_rejected_with_every_reason_and_its_line() {
        let cols = header(&["email", "age:number", "data"]).unwrap();
        let r = row(&cols, &record(&["nope", "old", "[1]"]), 7).unwrap_err();
        assert_eq!((r.line, r.email.as_deref()), (7, Some("nope")));
        assert!(
            r.reason.starts_with("email is not a valid address"),
            "{}",
            r.reason
        );
        assert!(r.reason.contains("age must be a number"), "{}", r.reason);
        assert!(
            r.reason.contains("data must be a JSON object"),
            "{}",
            r.reason
        );
        let extra = row(&cols, &record(&["a@example.com", "1", "{}", "x"]), 3).unwrap_err();
        assert!(extra.reason.contains("4 fields"), "{}", extra.reason);
    }
}
