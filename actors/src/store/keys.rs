//! Every key layout in one place. Ids are UUID v7 in their hyphenated text form, which
//! sorts like the ids themselves, so a prefix scan walks records in creation order.

use crate::model::{ContactId, DomainId, EventId, ProjectId, SegmentId};

pub fn project(id: ProjectId) -> Vec<u8> {
    format!("projects/{id}").into_bytes()
}

pub const PROJECTS: &[u8] = b"projects/";

pub fn key_hash(hash: &[u8; 32]) -> Vec<u8> {
    let mut k = b"keys/".to_vec();
    k.extend_from_slice(hash);
    k
}

pub fn contacts(p: ProjectId) -> Vec<u8> {
    format!("p/{p}/c/").into_bytes()
}

pub fn contact(p: ProjectId, c: ContactId) -> Vec<u8> {
    format!("p/{p}/c/{c}").into_bytes()
}

pub fn contact_by_email(p: ProjectId, email: &str) -> Vec<u8> {
    format!("p/{p}/ce/{email}").into_bytes()
}

/// Counters kept in the same batch as the writes they count, so `total` needs no scan.
pub fn counter(p: ProjectId, name: &str) -> Vec<u8> {
    format!("p/{p}/n/{name}").into_bytes()
}

/// Events end with their id, which sorts by the event's time (`EventId::at`), so in
/// every event index a time range is a key range and newest first is reverse order.
pub fn events(p: ProjectId) -> Vec<u8> {
    format!("p/{p}/e/").into_bytes()
}

pub fn event(p: ProjectId, e: EventId) -> Vec<u8> {
    format!("p/{p}/e/{e}").into_bytes()
}

pub fn events_by_contact(p: ProjectId, c: ContactId) -> Vec<u8> {
    format!("p/{p}/ec/{c}/").into_bytes()
}

pub fn event_by_contact(p: ProjectId, c: ContactId, e: EventId) -> Vec<u8> {
    format!("p/{p}/ec/{c}/{e}").into_bytes()
}

/// Names cannot hold a NUL, so `<name>\0` never prefixes another name's entries.
pub fn events_by_name(p: ProjectId, name: &str) -> Vec<u8> {
    format!("p/{p}/en/{name}\u{0}").into_bytes()
}

pub fn event_by_name(p: ProjectId, name: &str, e: EventId) -> Vec<u8> {
    format!("p/{p}/en/{name}\u{0}{e}").into_bytes()
}

/// Per-name statistics (count, first and last time) behind `GET /events/names`.
pub fn event_names(p: ProjectId) -> Vec<u8> {
    format!("p/{p}/names/").into_bytes()
}

pub fn event_name(p: ProjectId, name: &str) -> Vec<u8> {
    format!("p/{p}/names/{name}").into_bytes()
}

/// Per-name, per-contact statistics: a point read answers "did this contact trigger
/// X, and when last" on the write path, and a prefix scan gives every contact that
/// triggered X (one entry per contact, not per event) to a segment count.
pub fn contact_event_stats_by_name(p: ProjectId, name: &str) -> Vec<u8> {
    format!("p/{p}/nc/{name}\u{0}").into_bytes()
}

pub fn contact_event_stats(p: ProjectId, name: &str, c: ContactId) -> Vec<u8> {
    format!("p/{p}/nc/{name}\u{0}{c}").into_bytes()
}

pub fn segments(p: ProjectId) -> Vec<u8> {
    format!("p/{p}/s/").into_bytes()
}

pub fn segment(p: ProjectId, s: SegmentId) -> Vec<u8> {
    format!("p/{p}/s/{s}").into_bytes()
}

/// Members of a STATIC segment, in contact order (so newest contact first in reverse).
pub fn segment_members(p: ProjectId, s: SegmentId) -> Vec<u8> {
    format!("p/{p}/sm/{s}/").into_bytes()
}

pub fn segment_member(p: ProjectId, s: SegmentId, c: ContactId) -> Vec<u8> {
    format!("p/{p}/sm/{s}/{c}").into_bytes()
}

/// A remembered answer for an `Idempotency-Key` (see `crate::idempotency`).
pub fn idempotency(p: ProjectId, scope: &str, key: &str) -> Vec<u8> {
    format!("p/{p}/idem/{scope}/{key}").into_bytes()
}

/// Strips a prefix and reads the rest as an id.
pub fn id_after<T: std::str::FromStr>(key: &[u8], prefix: &[u8]) -> Option<T> {
    key.strip_prefix(prefix)
        .and_then(|rest| std::str::from_utf8(rest).ok())
        .and_then(|s| s.parse().ok())
}

/// A sender domain record.
pub fn domains(p: ProjectId) -> Vec<u8> {
    format!("p/{p}/d/").into_bytes()
}

pub fn domain(p: ProjectId, d: DomainId) -> Vec<u8> {
    format!("p/{p}/d/{d}").into_bytes()
}

/// A project's domain by (ASCII) name: uniqueness, and the send path's lookup.
pub fn domain_by_name(p: ProjectId, name: &str) -> Vec<u8> {
    format!("p/{p}/dn/{name}").into_bytes()
}

/// Every domain of every project, for the background re-check.
pub const ALL_DOMAINS: &[u8] = b"domains/";

pub fn domain_index(p: ProjectId, d: DomainId) -> Vec<u8> {
    format!("domains/{p}/{d}").into_bytes()
}
