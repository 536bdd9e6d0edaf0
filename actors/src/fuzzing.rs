//! Fuzz targets (issue #16): one function per target, each taking arbitrary bytes. The
//! `cargo fuzz` targets in `fuzz/` (nightly, libFuzzer) call them, and so does
//! `tests/fuzz_replay.rs` (stable: each target's corpus and regressions, then a short
//! run over mutated inputs).
//!
//! A target panics only when it finds a bug: a panic in the code under test, or an
//! invariant it checks that does not hold (a record that does not read back as itself, a
//! filter whose canonical form parses to another filter, a log cut short that loses a
//! whole record). An `Err` from the code under test is an answer, not a finding.

use std::cell::{Cell, RefCell};
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, OnceLock};

use serde_json::{json, Map, Value};

use crate::campaign::{Campaign, CampaignStats};
use crate::domain::{Domain, DomainName};
use crate::email::sending;
use crate::error::Result;
use crate::idempotency::{self, Claim};
use crate::model::email::MAX_EMAIL_LEN;
use crate::model::{
    Attachment, Contact, ContactId, ContactRef, EmailAddress, Engagement, Event, EventStats,
    Execution, OutboundEmail, Project, ProjectId, SegmentId, Template, Timestamp, Workflow,
};
use crate::render;
use crate::scheduler::Timer;
use crate::segment::{Compiled, Condition, ContactSubject, Group, Segment, SegmentKind};
use crate::store::keys::{self, KeyId};
use crate::store::overlay::Overlay;
use crate::store::{blocks, codec, wal, Batch, Durable, KvIter, KvPair, Op, Store};
use crate::verify::{self, lists, typo};
use crate::workflow::executions::Trigger;

/// The instant filters are evaluated at, and a day, in milliseconds.
const NOW: i64 = 1_800_000_000_000;
const DAY: i64 = 86_400_000;

// ---- filter ----

/// The segment filter language: `data` as JSON, parsed as a segment's filter (a group)
/// and as a workflow CONDITION step (one condition). What parses must come back
/// unchanged from its canonical and stored forms, and is evaluated against fixed
/// contacts.
pub fn filter(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(group) = Group::parse(&v, "filters") {
        check_group(&group);
    }
    if let Ok(condition) = Condition::parse(&v, "config") {
        check_condition(&condition);
    }
}

fn check_group(group: &Group) {
    // What the API shows, and what a segment or campaign stores, is the canonical form.
    let canonical = group.to_json();
    match Group::parse(&canonical, "filters") {
        Ok(back) => assert_eq!(
            &back, group,
            "the canonical form {canonical} parses to another filter"
        ),
        Err(e) => panic!("the canonical form {canonical} of a valid filter is refused: {e:?}"),
    }
    check_stored_segment(group);
    evaluate(&Compiled::new(group));
}

/// A DYNAMIC segment keeps its filter as JSON text in its record; it must read back as
/// the same segment.
fn check_stored_segment(group: &Group) {
    let segment = Segment {
        id: SegmentId::from_key_bytes([2; 16]),
        name: "Fuzz".into(),
        description: None,
        kind: SegmentKind::Dynamic,
        filters: Some(group.clone()),
        track_membership: false,
        created_at: Timestamp::from(NOW),
        updated_at: Timestamp::from(NOW),
    };
    let bytes = segment.encode().expect("a segment record always encodes");
    match Segment::decode(&bytes) {
        Ok(back) => assert_eq!(back, segment, "a stored segment reads back as another"),
        Err(e) => panic!("a stored segment does not read back: {e}"),
    }
}

fn check_condition(condition: &Condition) {
    // A workflow stores a CONDITION step as the text of its canonical form
    // (`workflow::steps`) and parses that text when the step runs (`executor`).
    let text = condition.to_json().to_string();
    let reparsed = serde_json::from_str::<Value>(&text)
        .map_err(|e| format!("{e}"))
        .and_then(|v| Condition::parse(&v, "config").map_err(|e| format!("{e:?}")));
    match reparsed {
        Ok(back) => assert_eq!(
            &back, condition,
            "the stored form {text} parses to another condition"
        ),
        Err(e) => panic!("the stored form {text} of a valid condition is refused: {e}"),
    }
    evaluate(&Compiled::condition(condition));
}

/// Evaluates against each fixed contact, with every other event name of the filter
/// triggered once, a day ago.
fn evaluate(compiled: &Compiled) {
    let once = EventStats {
        count: 1,
        first_at: NOW - DAY,
        last_at: NOW - DAY,
    };
    let events: Vec<Option<EventStats>> = (0..compiled.event_names().len())
        .map(|slot| (slot % 2 == 0).then_some(once))
        .collect();
    for contact in contacts() {
        let _ = compiled.matches(&ContactSubject::new(compiled, contact, &events), NOW);
    }
}

/// Two contacts: one with data of every JSON type (nested, dates, a null), subscribed
/// and three days old; one with no data, unsubscribed and over a year old.
fn contacts() -> &'static [Contact] {
    static CONTACTS: OnceLock<Vec<Contact>> = OnceLock::new();
    CONTACTS.get_or_init(|| {
        let data = json!({
            "plan": "pro", "n": 5, "ratio": 0.5, "vip": true, "tags": ["a", "b"],
            "addr": {"city": "Oslo", "zip": 150}, "seen": "2027-01-14T00:00:00Z",
            "day": "2027-01-14", "gone": null
        });
        vec![
            contact("ada@example.com", true, data, 3),
            contact("bob@acme.io", false, json!({}), 400),
        ]
    })
}

fn contact(email: &str, subscribed: bool, data: Value, age_days: i64) -> Contact {
    Contact {
        id: ContactId::from_key_bytes([3; 16]),
        email: EmailAddress::parse(email).expect("a fixed, valid address"),
        subscribed,
        data: match data {
            Value::Object(map) => map,
            _ => Map::new(),
        },
        created_at: Timestamp::from(NOW - age_days * DAY),
        updated_at: Timestamp::from(NOW - age_days * DAY / 2),
    }
}

// ---- template ----

/// The template sandbox: `data` is a template's source, then optionally a 0 byte and
/// the JSON `data` of a send. The source is compiled as both subject and body (a body is
/// HTML-escaped and a subject is not, and they are charged differently) and rendered
/// with the variables a send gives the first fixed contact, under the default limits,
/// as production compiles and renders.
pub fn template(data: &[u8]) {
    let (source, call) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let source = String::from_utf8_lossy(source);
    let call = match serde_json::from_slice::<Value>(call) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let vars = sending::variables(&contacts()[0], &call);
    let Ok(compiled) = sandboxed(|| render::Limits::default().compile(&source, &source)) else {
        return;
    };
    if let Ok((subject, body)) = sandboxed(|| compiled.render(&vars)) {
        let max = render::Limits::default().max_output_bytes as usize;
        assert!(
            subject.len() <= max && body.len() <= max,
            "a render made {} and {} bytes, over the limit of {max}",
            subject.len(),
            body.len()
        );
    }
}

thread_local! {
    /// Whether this thread runs inside `sandboxed`.
    static IN_SANDBOX: Cell<bool> = const { Cell::new(false) };
    /// The message of the last panic inside `sandboxed` on this thread.
    static SANDBOX_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`, a compile or a render. tera panics on a few inputs, and `render` catches
/// those panics and answers a refused template; but libFuzzer's panic hook aborts on
/// every panic, caught or not. So the hook is wrapped, once: a panic on this thread
/// while `f` runs is only recorded, and what fails the target is a panic that escapes
/// `f` (one that `render` does not catch), reported with the recorded message.
fn sandboxed<T>(f: impl FnOnce() -> T) -> T {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let outer = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if IN_SANDBOX.try_with(Cell::get).unwrap_or(false) {
                let _ = SANDBOX_PANIC.try_with(|p| *p.borrow_mut() = Some(info.to_string()));
            } else {
                outer(info);
            }
        }));
    });
    IN_SANDBOX.with(|s| s.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    IN_SANDBOX.with(|s| s.set(false));
    match result {
        Ok(value) => value,
        Err(_) => {
            let message = SANDBOX_PANIC.with(|p| p.borrow_mut().take());
            panic!(
                "a panic escaped the template sandbox: {}",
                message.unwrap_or_default()
            )
        }
    }
}

// ---- email ----

/// Addresses: `EmailAddress::parse` (every contact's and sender's address went through
/// it), the verifier's syntax step and its classification (typo, disposable, alias and
/// personal lists), which need no DNS, and the sender-domain parser on the part after
/// the last `@`.
pub fn email(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let address = EmailAddress::parse(&raw);
    if let Ok(address) = &address {
        check_address(address);
    }
    match verify::parse(&raw) {
        Ok(parsed) => classify(&parsed),
        // What can be a contact's address is at least shaped like one to /v1/verify.
        Err(_) => assert!(
            address.is_err(),
            "{raw:?} is a contact's address, but /v1/verify finds no address in it"
        ),
    }
    let domain = raw.rsplit_once('@').map_or(&*raw, |(_, d)| d);
    if let Ok(name) = DomainName::parse(domain) {
        // A domain record parses its stored name again when it is read.
        assert_eq!(
            DomainName::parse(name.as_str()).as_ref(),
            Ok(&name),
            "a domain name changes when it is parsed again"
        );
    }
}

fn check_address(address: &EmailAddress) {
    // A stored contact parses its address again when it is read (`Contact::decode`).
    assert_eq!(
        EmailAddress::parse(address.as_str()).as_ref(),
        Ok(address),
        "an address changes when it is parsed again"
    );
    assert!(
        address.as_str().len() <= MAX_EMAIL_LEN,
        "{address} is longer than {MAX_EMAIL_LEN}"
    );
    assert!(
        !address.local_part().is_empty() && address.domain().contains('.'),
        "{address} has no local part or no dotted domain"
    );
}

fn classify(address: &verify::Address) {
    let _ = address.is_plus_addressed();
    let Some(domain) = address.ascii_domain.as_deref() else {
        assert!(
            !address.syntax_ok(),
            "{:?} has good syntax but no domain",
            address.normalized
        );
        return;
    };
    let suggestion = typo::suggest(domain);
    assert_ne!(
        suggestion.as_deref(),
        Some(domain),
        "a domain is suggested as a typo of itself"
    );
    let _ = (
        lists::is_disposable(domain),
        lists::is_alias(domain),
        lists::is_personal(domain),
    );
}

// ---- wal ----

/// The seq of the log files replayed here, and where a record's header holds it: a
/// header is `len | crc32 | seq`, 4 bytes little-endian each (see `store::wal`).
const SEQ: u64 = 1;
const SEQ_AT: usize = 8;
const HEADER: usize = 12;
/// Separates payloads in `data` for the framed replay. In bincode 0xFF only appears
/// inside a wide integer, so it is rare in the payloads of small records.
const PAYLOAD_SEPARATOR: u8 = 0xFF;
/// A valid log at most this long is replayed cut at every length.
const EVERY_CUT_UP_TO: usize = 128;
/// Writes made from the input for the valid log (one per input byte).
const MAX_WRITES: usize = 12;

/// The write-ahead log's replay (`wal::read_records`, then the fold start-up does):
/// - `data` as a log file, as a crash or a bad disk may leave one;
/// - `data` cut into payloads framed as valid records (length, checksum and seq), so
///   that every payload reaches the decoder;
/// - a valid log of writes made from `data`, cut short at many points (at every length
///   when it is short), replayed under another file's seq, and with `data` after it.
pub fn wal(data: &[u8]) {
    let scratch = Scratch::new();
    if let Ok(records) = scratch.replay(data, SEQ) {
        // What replay read, written out again by the log's own encoder, reads the same.
        let (log, _) = log_of(&records, SEQ);
        match scratch.replay(&log, SEQ) {
            Ok(again) => assert_same(&again, &records, "a replayed log written again"),
            Err(e) => panic!("a replayed log written again does not replay: {e}"),
        }
        let mut folded = Overlay::default();
        for ops in records {
            folded.apply(ops);
        }
        let _ = folded.snapshot();
    }
    check_framed_payloads(&scratch, data);
    check_valid_log(&scratch, data);
}

/// Replay is Ok exactly when every payload decodes, and then gives every payload.
fn check_framed_payloads(scratch: &Scratch, data: &[u8]) {
    let payloads: Vec<&[u8]> = data
        .split(|&b| b == PAYLOAD_SEPARATOR)
        .filter(|p| !p.is_empty())
        .collect();
    let mut log = Vec::new();
    for payload in &payloads {
        frame(payload, SEQ, &mut log);
    }
    let decoded: Option<Vec<Vec<Op>>> = payloads
        .iter()
        .map(|p| codec::decode::<Vec<Op>>(p).ok())
        .collect();
    match (scratch.replay(&log, SEQ), decoded) {
        (Ok(replayed), Some(expected)) => assert_same(&replayed, &expected, "framed payloads"),
        (Err(_), None) => {}
        (Ok(_), None) => panic!("replay accepted a record whose payload does not decode"),
        (Err(e), Some(_)) => panic!("replay refused records whose payloads all decode: {e}"),
    }
}

fn check_valid_log(scratch: &Scratch, data: &[u8]) {
    let records = writes_from(data);
    let (log, ends) = log_of(&records, SEQ);
    for cut in cuts(&ends) {
        // A record is replayed when it is whole, and nothing after a torn one.
        let whole = ends.iter().filter(|&&end| end <= cut).count();
        let what = format!("the log cut at {cut} of {} bytes", log.len());
        match scratch.replay(&log[..cut], SEQ) {
            Ok(replayed) => assert_same(&replayed, &records[..whole], &what),
            Err(e) => panic!("{what} is refused: {e}"),
        }
    }
    // A recycled file: records stamped with another file's seq are not this file's.
    match scratch.replay(&log, SEQ + 1) {
        Ok(replayed) => assert!(replayed.is_empty(), "another file's records were replayed"),
        Err(e) => panic!("a log under another seq is refused: {e}"),
    }
    // Bytes after the last record (a torn write, or what a recycled file held) never
    // take back a record before them. (An error is possible: they may frame a record
    // that passes its checksum and does not decode.)
    let mut tailed = log;
    tailed.extend_from_slice(data);
    if let Ok(replayed) = scratch.replay(&tailed, SEQ) {
        let kept = replayed.len().min(records.len());
        assert_same(&replayed[..kept], &records, "a log with bytes after it");
    }
}

/// A few records of puts and deletes made from the first bytes of `data`: each byte is
/// one write of a one-byte key (a delete when the byte is a multiple of 5, else a put of
/// up to 15 copies of the byte), and a byte that is a multiple of 3 ends its record.
fn writes_from(data: &[u8]) -> Vec<Vec<Op>> {
    let mut records = Vec::new();
    let mut ops = Vec::new();
    for &b in data.iter().take(MAX_WRITES) {
        ops.push(match b % 5 {
            0 => Op::Delete(vec![b]),
            _ => Op::Put(vec![b], vec![b; usize::from(b % 16)]),
        });
        if b % 3 == 0 {
            records.push(std::mem::take(&mut ops));
        }
    }
    if !ops.is_empty() {
        records.push(ops);
    }
    records
}

/// A log file holding `records` stamped with `seq`, as the log writer makes it, and
/// where each record ends.
fn log_of(records: &[Vec<Op>], seq: u64) -> (Vec<u8>, Vec<usize>) {
    let mut log = Vec::new();
    let mut ends = Vec::with_capacity(records.len());
    for ops in records {
        let start = log.len();
        wal::encode_record(ops, &mut log)
            .expect("what fitted in a log file, or a few small writes, fits a record");
        log[start + SEQ_AT..start + HEADER].copy_from_slice(&(seq as u32).to_le_bytes());
        ends.push(log.len());
    }
    (log, ends)
}

/// Appends a record around `payload`, framed as `log_of` frames one.
fn frame(payload: &[u8], seq: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&(seq as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Where to cut a log whose records end at `ends`: at every length when it is short,
/// else at each record's edges and next to them, inside its header and its payload.
fn cuts(ends: &[usize]) -> Vec<usize> {
    let len = ends.last().copied().unwrap_or(0);
    if len <= EVERY_CUT_UP_TO {
        return (0..=len).collect();
    }
    let mut out = vec![0];
    let mut start = 0;
    for &end in ends {
        let middle = (start + HEADER + end) / 2;
        for cut in [
            start + 1,
            start + SEQ_AT,
            start + HEADER - 1,
            start + HEADER,
            middle,
            end - 1,
            end,
        ] {
            out.push(cut.min(end));
        }
        start = end;
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn assert_same(replayed: &[Vec<Op>], written: &[Vec<Op>], what: &str) {
    let same = replayed.len() == written.len()
        && replayed
            .iter()
            .zip(written)
            .all(|(a, b)| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_op(x, y)));
    assert!(same, "{what}: replay gives {replayed:?}, not {written:?}");
}

fn same_op(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (Op::Put(k1, v1), Op::Put(k2, v2)) => k1 == k2 && v1 == v2,
        (Op::Delete(k1), Op::Delete(k2)) => k1 == k2,
        _ => false,
    }
}

/// A log file of this process in the temporary directory, removed when dropped (also
/// when a check panics).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("mailroom-fuzz-wal-{}-{n}.log", std::process::id());
        Scratch(std::env::temp_dir().join(name))
    }

    /// Replays `bytes` as log file `seq`, as start-up does.
    fn replay(&self, bytes: &[u8], seq: u64) -> Result<Vec<Vec<Op>>> {
        fs::write(&self.0, bytes).expect("the temporary directory takes a small file");
        wal::read_records(&self.0, seq)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

// ---- records ----

/// The decoding of every stored record type: each must answer an error, never panic
/// (nor allocate more than the bytes can hold), and a record that decodes must encode
/// to bytes that decode again and encode the same: what the engine writes, it reads
/// back as itself. Keys that carry data (outbox entries, timers, the ready queue, the
/// indexes of sending campaigns and of domains) are parsed too, and the event log's
/// blocks and an idempotency record are read through a store that holds `data`.
pub fn records(data: &[u8]) {
    round_trip(data, Contact::decode, Contact::encode);
    check_contact_ref(data);
    round_trip(data, Event::decode, Event::encode);
    round_trip(data, Template::decode, Template::encode);
    round_trip(data, Segment::decode, Segment::encode);
    round_trip(data, Campaign::decode, Campaign::encode);
    round_trip(data, Workflow::decode, Workflow::encode);
    round_trip(data, Execution::decode, Execution::encode);
    round_trip(data, OutboundEmail::decode, OutboundEmail::encode);
    round_trip(data, Domain::decode, Domain::encode);
    round_trip(data, codec::decode::<Project>, codec::encode::<Project>);
    round_trip(
        data,
        codec::decode::<EventStats>,
        codec::encode::<EventStats>,
    );
    round_trip(
        data,
        codec::decode::<CampaignStats>,
        codec::encode::<CampaignStats>,
    );
    round_trip(
        data,
        codec::decode::<Engagement>,
        codec::encode::<Engagement>,
    );
    // A campaign's audience chunks, a send's attachments, an event's workflow triggers,
    // and a write-ahead log record's writes.
    round_trip(
        data,
        codec::decode::<Vec<ContactId>>,
        codec::encode::<Vec<ContactId>>,
    );
    round_trip(
        data,
        codec::decode::<Vec<Attachment>>,
        codec::encode::<Vec<Attachment>>,
    );
    round_trip(
        data,
        codec::decode::<Vec<Trigger>>,
        codec::encode::<Vec<Trigger>>,
    );
    round_trip(data, codec::decode::<Vec<Op>>, codec::encode::<Vec<Op>>);
    let _ = codec::decode_u64(data);
    check_keys(data);
    read_through_store(data);
}

fn round_trip<T: std::fmt::Debug>(
    bytes: &[u8],
    decode: fn(&[u8]) -> Result<T>,
    encode: fn(&T) -> Result<Vec<u8>>,
) {
    let Ok(record) = decode(bytes) else {
        return;
    };
    let Ok(written) = encode(&record) else {
        return;
    };
    let again = match decode(&written) {
        Ok(again) => again,
        Err(e) => panic!("{record:?} was written but does not read back: {e}"),
    };
    let rewritten = match encode(&again) {
        Ok(bytes) => bytes,
        Err(e) => panic!("{again:?} was read back but does not encode: {e}"),
    };
    assert!(
        rewritten == written,
        "{record:?} changes each time it is written:\n{}\n{}",
        written.escape_ascii(),
        rewritten.escape_ascii()
    );
}

/// Segment scans read contacts through `ContactRef`, which must read every contact that
/// the full form reads, with the same fields.
fn check_contact_ref(bytes: &[u8]) {
    let light = ContactRef::decode(bytes);
    let Ok(full) = Contact::decode(bytes) else {
        return;
    };
    match light {
        Ok(r) => assert!(
            r.id == full.id
                && r.subscribed == full.subscribed
                && r.created_at == full.created_at.millis()
                && r.updated_at == full.updated_at.millis(),
            "ContactRef reads {full:?} with other fields"
        ),
        Err(e) => panic!("ContactRef refuses {full:?}, which Contact reads: {e}"),
    }
}

/// `data` after each tag whose keys carry data: a key that parses must be rebuilt from
/// what was read as the same bytes.
fn check_keys(data: &[u8]) {
    let key = |tag: &[u8]| [tag, data].concat();
    let timer = key(keys::TIMERS);
    if let Some(t) = Timer::parse(&timer) {
        assert_eq!(t.key(), timer, "a timer key is rebuilt as another");
    }
    let outbox = key(keys::OUTBOX);
    if let Some((due, p, e)) = keys::parse_outbox(&outbox) {
        assert_eq!(
            keys::outbox(due, p, e),
            outbox,
            "an outbox key is rebuilt as another"
        );
    }
    let ready = key(keys::READY);
    if let Some((p, x)) = keys::parse_ready(&ready) {
        assert_eq!(
            keys::ready(p, x),
            ready,
            "a ready key is rebuilt as another"
        );
    }
    let sending = key(keys::SENDING_CAMPAIGNS);
    if let Some((p, c)) = keys::parse_sending_campaign(&sending) {
        assert_eq!(
            keys::sending_campaign(p, c),
            sending,
            "a sending campaign key is rebuilt as another"
        );
    }
    let domain = key(keys::ALL_DOMAINS);
    if let Some((p, d)) = keys::parse_domain_index(&domain) {
        assert_eq!(
            keys::domain_index(p, d),
            domain,
            "a domain index key is rebuilt as another"
        );
    }
    let _ = keys::execution_in(data);
    // The indexes by email, by domain name and by key hash hold an id as text.
    let _ = std::str::from_utf8(data).map(|s| s.parse::<ProjectId>());
}

/// The event log's blocks, with `data` as a head block and as a later one (each entry
/// an event), and an idempotency record.
fn read_through_store(data: &[u8]) {
    let p = ProjectId::from_key_bytes([1; 16]);
    let prefix = keys::events(p);
    for first in [[0; 16], [1; 16]] {
        let store = OneValue {
            key: keys::with_id(&prefix, &first),
            value: data.to_vec(),
        };
        let _ = blocks::get(&store, &prefix, &[0xff; 16]);
        for (_, payload) in blocks::iter_rev(&store, &prefix, None).flatten() {
            let _ = Event::decode(&payload);
        }
    }
    let store = OneValue {
        key: Vec::new(),
        value: data.to_vec(),
    };
    let claim = Claim::new("track", "fuzz", &json!({}), 60_000);
    let _ = idempotency::lookup::<Value>(&store, p, &claim, Timestamp::from(0));
}

/// A store holding one value under one key: `get` answers the value for any key, and
/// a scan yields the pair when the key is under its prefix. Enough for reads that take
/// a store.
struct OneValue {
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Store for OneValue {
    fn get(&self, _key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(Some(self.value.clone()))
    }

    fn scan<'a>(&'a self, prefix: &[u8], _after: Option<&[u8]>, _reverse: bool) -> KvIter<'a> {
        let pair: Option<Result<KvPair>> = self
            .key
            .starts_with(prefix)
            .then(|| Ok((self.key.clone(), self.value.clone())));
        Box::new(pair.into_iter())
    }

    fn apply(&self, _batch: Batch) -> Result<crate::store::Applied> {
        Ok(Default::default())
    }

    fn durable(&self) -> Durable {
        let done: Result<()> = Ok(());
        Box::pin(std::future::ready(done))
    }

    fn flush_blocking(&self) -> Result<()> {
        Ok(())
    }

    fn snapshot(&self) -> Result<KvIter<'_>> {
        Ok(self.scan(b"", None, false))
    }
}

/// A message mailed to a return path (`feedback::reports::read`): never a panic; every
/// report it gives names a kind its fields allow, with text free of control characters
/// (it reaches events, logs and webhook payloads), and at most `MAX_RECIPIENTS` of them.
pub fn reports(data: &[u8]) {
    use crate::feedback::reports::{self, Read, MAX_RECIPIENTS};
    if let Read::Reports(list) = reports::read(data) {
        assert!(
            list.len() <= MAX_RECIPIENTS,
            "{} reports from one message",
            list.len()
        );
        for r in &list {
            for text in [&r.recipient, &r.status, &r.diagnostic, &r.feedback_type]
                .into_iter()
                .flatten()
            {
                assert!(
                    !text.chars().any(char::is_control),
                    "control characters in {text:?}"
                );
            }
            if let Some(status) = &r.status {
                let class = status.chars().next();
                match r.kind {
                    crate::feedback::Kind::Hard => assert_eq!(class, Some('5'), "{r:?}"),
                    crate::feedback::Kind::Soft => assert!(class != Some('5'), "{r:?}"),
                    crate::feedback::Kind::Complaint => {}
                }
            }
        }
    }
}
