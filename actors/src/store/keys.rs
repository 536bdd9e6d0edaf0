//! Every key layout in one place. A key is ASCII tags ending in `/` and ids as their 16
//! UUID bytes (v7, so they sort by creation time: a prefix scan walks records in creation
//! order). Ids have a fixed length, so a tag always starts at the same offset and no
//! prefix of one index is a prefix of another. Binary ids keep keys short: sled compares
//! and copies whole keys on every insert, and the write path of `/v1/track` puts several.
//!
//! `FORMAT` names this layout. A data directory in an older one is migrated at start-up
//! (`upgrade`); a change to any key or stored value's shape bumps `FORMAT` and adds a
//! migration there (docs/operations.md, Upgrades).
//! Layout 3 keeps the event log and its indexes in blocks (`store::blocks`).

use crate::model::{
    CampaignId, ContactId, DeliveryId, DomainId, EmailId, ExecutionId, ImportId, ProjectId,
    SegmentId, TemplateId, WebhookId, WorkflowId,
};

/// The key layout's version, kept under `FORMAT_KEY` (see `SledStore::open`).
pub const FORMAT: u32 = 6;
pub const FORMAT_KEY: &[u8] = b"meta/key-format";
/// The oldest layout `upgrade` has migrations from; older ones are refused.
pub const OLDEST_UPGRADABLE: u32 = 5;
/// Where an upgrade under way records its progress, so a crash resumes it.
pub const UPGRADE_PROGRESS_KEY: &[u8] = b"meta/upgrade-progress";

pub use crate::model::id::KeyId;

/// Joins the parts of a key.
fn key<'a>(parts: impl Iterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    let mut k = Vec::with_capacity(parts.clone().map(<[u8]>::len).sum());
    for part in parts {
        k.extend_from_slice(part);
    }
    k
}

/// `p/<project><tag><rest...>`: every per-project key.
fn in_project(p: ProjectId, tag: &[u8], rest: &[&[u8]]) -> Vec<u8> {
    let head: [&[u8]; 3] = [b"p/", p.as_bytes(), tag];
    key(head.into_iter().chain(rest.iter().copied()))
}

pub fn project(id: ProjectId) -> Vec<u8> {
    key([PROJECTS, id.as_bytes()].into_iter())
}

pub const PROJECTS: &[u8] = b"projects/";

/// API keys' records, by the key's hash.
pub(crate) const API_KEYS: &[u8] = b"keys/";

/// Every key of one kind of a project's records (`/whd/`: its webhook deliveries).
pub fn in_project_tag(p: ProjectId, tag: &[u8]) -> Vec<u8> {
    in_project(p, tag, &[])
}

/// A project's event webhooks (`webhooks`).
pub fn webhooks(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/wh/", &[])
}

pub fn webhook(p: ProjectId, w: WebhookId) -> Vec<u8> {
    in_project(p, b"/wh/", &[w.as_bytes()])
}

/// Where an endpoint's walk of the event log stands: the event id from which events
/// may still lack their delivery.
pub fn webhook_cursor(p: ProjectId, w: WebhookId) -> Vec<u8> {
    in_project(p, b"/whc/", &[w.as_bytes()])
}

/// One endpoint's deliveries, oldest first (ids sort by their time).
pub fn deliveries(p: ProjectId, w: WebhookId) -> Vec<u8> {
    in_project(p, b"/whd/", &[w.as_bytes()])
}

pub fn delivery(p: ProjectId, w: WebhookId, d: DeliveryId) -> Vec<u8> {
    in_project(p, b"/whd/", &[w.as_bytes(), d.as_bytes()])
}

/// A project's suppression list (API.md 28), by the SHA-256 of the address: what a
/// send looks up, and what outlives the contact's erasure.
pub fn suppression(p: ProjectId, hash: &[u8; 32]) -> Vec<u8> {
    in_project(p, b"/sup/", &[hash])
}

/// The suppression list by when each entry was made (a v7 id): what its pages walk.
pub fn suppressions_by_time(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/supt/", &[])
}

/// How many entries the suppression list holds, per reason (one byte).
pub fn suppression_count(p: ProjectId, reason: u8) -> Vec<u8> {
    in_project(p, b"/supn/", &[&[reason]])
}

/// A project's rolling tallies of sent, bounced and complained-of emails (`reputation`).
pub fn reputation(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/rep/", &[])
}

/// The soft bounces an address had lately (their times), counted to suppress it.
pub fn soft_bounces(p: ProjectId, hash: &[u8; 32]) -> Vec<u8> {
    in_project(p, b"/sbn/", &[hash])
}

/// Mail to a return path that could not be read, kept for `feedback.quarantine_days`
/// (its id is a v7 uuid: it sorts, and tells, by when it came).
pub fn feedback_quarantine(p: ProjectId, id: &uuid::Uuid) -> Vec<u8> {
    in_project(p, b"/fq/", &[id.as_bytes()])
}

/// That an email has a report in quarantine already: one per email is kept.
pub fn feedback_quarantined_email(p: ProjectId, email: EmailId) -> Vec<u8> {
    in_project(p, b"/fqe/", &[email.as_bytes()])
}

/// Every quarantined report of a project.
pub fn feedback_quarantined(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/fq/", &[])
}

/// Delivery reports already applied, by the report's own id (a provider's event id,
/// or the digest of a report message): the same report twice changes nothing more.
pub fn feedback_seen(p: ProjectId, id: &[u8; 32]) -> Vec<u8> {
    in_project(p, b"/fbs/", &[id])
}

/// Deliveries waiting for their next attempt, every project's, by when it is due:
/// `wh-due/<due ms, 8 bytes big-endian><project><webhook><delivery>`.
pub const WEBHOOK_DUE: &[u8] = b"wh-due/";

pub fn webhook_due(due_ms: i64, p: ProjectId, w: WebhookId, d: DeliveryId) -> Vec<u8> {
    let due = (due_ms.max(0) as u64).to_be_bytes();
    key([WEBHOOK_DUE, &due, p.as_bytes(), w.as_bytes(), d.as_bytes()].into_iter())
}

/// (due ms, project, webhook, delivery) of a `webhook_due` key.
pub fn parse_webhook_due(k: &[u8]) -> Option<(i64, ProjectId, WebhookId, DeliveryId)> {
    let rest = k.strip_prefix(WEBHOOK_DUE)?;
    if rest.len() != 8 + 48 {
        return None;
    }
    let due = u64::from_be_bytes(rest[..8].try_into().ok()?) as i64;
    let id = |at: usize| -> Option<[u8; 16]> { rest.get(at..at + 16)?.try_into().ok() };
    Some((
        due,
        ProjectId::from_key_bytes(id(8)?),
        WebhookId::from_key_bytes(id(24)?),
        DeliveryId::from_key_bytes(id(40)?),
    ))
}

/// Where a project's rate (its sending pace, its API budget) stood when its last owner
/// let it go (`Registry::carry_pace`): the next allowed time, ms since the epoch.
pub fn pace(p: ProjectId, name: &str) -> Vec<u8> {
    in_project(p, b"/pace/", &[name.as_bytes()])
}

/// The dashboard's signed-in sessions, by the SHA-256 of the cookie's id: global keys,
/// so that every node of a cluster reads them.
pub const SESSIONS: &[u8] = b"sessions/";

pub fn session(id_digest: &[u8; 32]) -> Vec<u8> {
    key([SESSIONS, id_digest.as_slice()].into_iter())
}

pub fn key_hash(hash: &[u8; 32]) -> Vec<u8> {
    key([API_KEYS, hash].into_iter())
}

pub fn contacts(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/c/", &[])
}

pub fn contact(p: ProjectId, c: ContactId) -> Vec<u8> {
    in_project(p, b"/c/", &[c.as_bytes()])
}

pub fn contact_by_email(p: ProjectId, email: &str) -> Vec<u8> {
    in_project(p, b"/ce/", &[email.as_bytes()])
}

/// Counters kept in the same batch as the writes they count, so `total` needs no scan.
pub fn counter(p: ProjectId, name: &str) -> Vec<u8> {
    in_project(p, b"/n/", &[name.as_bytes()])
}

/// The name of a workflow's counter of ended executions (`counter`).
pub fn finished_executions(w: crate::model::WorkflowId) -> String {
    format!("wxf/{w}")
}

/// The event log, and its indexes by contact and by name, are lists of blocks
/// (`store::blocks`): each key there is one of these prefixes and the first event id of
/// a run of events. Event ids sort by the event's time (`EventId::at`), so a time range
/// is a key range and newest first is reverse order.
pub fn events(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/e/", &[])
}

pub fn events_by_contact(p: ProjectId, c: ContactId) -> Vec<u8> {
    in_project(p, b"/ec/", &[c.as_bytes()])
}

/// Names cannot hold a NUL, so `<name>\0` never prefixes another name's entries.
pub fn events_by_name(p: ProjectId, name: &str) -> Vec<u8> {
    in_project(p, b"/en/", &[name.as_bytes(), b"\0"])
}

/// Per-name statistics (count, first and last time) behind `GET /events/names`.
pub fn event_names(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/names/", &[])
}

pub fn event_name(p: ProjectId, name: &str) -> Vec<u8> {
    in_project(p, b"/names/", &[name.as_bytes()])
}

/// Per-name, per-contact statistics: a point read answers "did this contact trigger
/// X, and when last" on the write path, and a prefix scan gives every contact that
/// triggered X (one entry per contact, not per event) to a segment count.
pub fn contact_event_stats_by_name(p: ProjectId, name: &str) -> Vec<u8> {
    in_project(p, b"/nc/", &[name.as_bytes(), b"\0"])
}

pub fn contact_event_stats(p: ProjectId, name: &str, c: ContactId) -> Vec<u8> {
    in_project(p, b"/nc/", &[name.as_bytes(), b"\0", c.as_bytes()])
}

pub fn segments(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/s/", &[])
}

pub fn segment(p: ProjectId, s: SegmentId) -> Vec<u8> {
    in_project(p, b"/s/", &[s.as_bytes()])
}

/// Members of a STATIC segment, in contact order (so newest contact first in reverse).
pub fn segment_members(p: ProjectId, s: SegmentId) -> Vec<u8> {
    in_project(p, b"/sm/", &[s.as_bytes()])
}

pub fn segment_member(p: ProjectId, s: SegmentId, c: ContactId) -> Vec<u8> {
    in_project(p, b"/sm/", &[s.as_bytes(), c.as_bytes()])
}

pub fn templates(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/t/", &[])
}

pub fn template(p: ProjectId, t: TemplateId) -> Vec<u8> {
    in_project(p, b"/t/", &[t.as_bytes()])
}

/// A template's text part, when it has one: apart from the record for the same reason as
/// `email_text` (and outside `templates`, so it counts for no template limit).
pub fn template_text(p: ProjectId, t: TemplateId) -> Vec<u8> {
    in_project(p, b"/tt/", &[t.as_bytes()])
}

/// Every email record of a project, in id (creation) order: what retention walks.
pub fn emails(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/m/", &[])
}

/// An email's record; its place in the queue is `outbox`.
pub fn email(p: ProjectId, e: EmailId) -> Vec<u8> {
    in_project(p, b"/m/", &[e.as_bytes()])
}

/// An email's own text/plain part, when its send gave one. Apart from the record, whose
/// positional encoding cannot take a new field without breaking the records stored.
pub fn email_text(p: ProjectId, e: EmailId) -> Vec<u8> {
    in_project(p, b"/mt/", &[e.as_bytes()])
}

/// An email's tracked opens and clicks (`model::Engagement`).
pub fn engagement(p: ProjectId, e: EmailId) -> Vec<u8> {
    in_project(p, b"/mx/", &[e.as_bytes()])
}

/// One send's attachments, stored once for all its emails (see `email::sending`).
pub fn attachments(p: ProjectId, id: EmailId) -> Vec<u8> {
    in_project(p, b"/att/", &[id.as_bytes()])
}

/// How many of that send's emails still need its attachments (u32, little-endian).
pub fn attachment_users(p: ProjectId, id: EmailId) -> Vec<u8> {
    in_project(p, b"/att-users/", &[id.as_bytes()])
}

/// A remembered answer for an `Idempotency-Key` (see `crate::idempotency`).
pub fn idempotency(p: ProjectId, scope: &str, key: &str) -> Vec<u8> {
    in_project(p, b"/idem/", &[scope.as_bytes(), b"/", key.as_bytes()])
}

/// Every remembered answer of a project (an erasure looks through them).
pub fn idempotency_records(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/idem/", &[])
}

/// Idempotency records by expiry: `<expires_at, 8 bytes big-endian><scope>/<key>`, so
/// the expired ones are a prefix of the range.
pub fn idempotency_expiries(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/idem-exp/", &[])
}

pub fn idempotency_expiry(p: ProjectId, expires_at: i64, scope: &str, key: &str) -> Vec<u8> {
    let at = (expires_at.max(0) as u64).to_be_bytes();
    in_project(
        p,
        b"/idem-exp/",
        &[&at, scope.as_bytes(), b"/", key.as_bytes()],
    )
}

/// `prefix` followed by an id: a bound for a range scan of an index.
pub fn with_id(prefix: &[u8], id: &[u8; 16]) -> Vec<u8> {
    key([prefix, id].into_iter())
}

/// Strips a prefix and reads the rest, exactly 16 bytes, as an id.
pub fn id_after<T: KeyId>(key: &[u8], prefix: &[u8]) -> Option<T> {
    let rest: [u8; 16] = key.strip_prefix(prefix)?.try_into().ok()?;
    Some(T::from_key_bytes(rest))
}

/// A sender domain record.
pub fn domains(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/d/", &[])
}

pub fn domain(p: ProjectId, d: DomainId) -> Vec<u8> {
    in_project(p, b"/d/", &[d.as_bytes()])
}

/// A project's domain by (ASCII) name: uniqueness, and the send path's lookup.
pub fn domain_by_name(p: ProjectId, name: &str) -> Vec<u8> {
    in_project(p, b"/dn/", &[name.as_bytes()])
}

/// Every domain of every project, for the background re-check.
pub const ALL_DOMAINS: &[u8] = b"domains/";

pub fn domain_index(p: ProjectId, d: DomainId) -> Vec<u8> {
    key([ALL_DOMAINS, p.as_bytes(), d.as_bytes()].into_iter())
}

/// (project, domain) of a `domain_index` key.
pub fn parse_domain_index(k: &[u8]) -> Option<(ProjectId, DomainId)> {
    let rest = k.strip_prefix(ALL_DOMAINS)?;
    if rest.len() != 32 {
        return None;
    }
    Some((id_after(&rest[..16], b"")?, id_after(&rest[16..], b"")?))
}

pub fn campaigns(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/cp/", &[])
}

pub fn campaign(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cp/", &[c.as_bytes()])
}

/// A campaign's counts (`model::CampaignStats`), kept beside its record so that the
/// delivery path updates them without rewriting the campaign.
/// Whether a domain publishes a DMARC record (`v=DMARC1` at `_dmarc.<domain>`), as its
/// last check found: advice beside the domain's record, which keeps its layout.
pub fn domain_advice(p: ProjectId, d: DomainId) -> Vec<u8> {
    in_project(p, b"/ddm/", &[d.as_bytes()])
}

/// Why a PAUSED campaign stopped (text), while it is paused.
pub fn campaign_paused(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cpp/", &[c.as_bytes()])
}

/// A campaign's stats when it was last resumed: its pause rule counts from there.
pub fn campaign_resumed(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cpr/", &[c.as_bytes()])
}

pub fn campaign_stats(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cps/", &[c.as_bytes()])
}

/// A campaign's audience as fixed when sending started: chunks of contact ids
/// (`<chunk number, 4 bytes big-endian>`), so no one value holds a whole audience.
/// Every campaign's audience chunks.
pub fn campaign_audiences(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/cpa/", &[])
}

pub fn campaign_audience(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cpa/", &[c.as_bytes()])
}

pub fn campaign_audience_chunk(p: ProjectId, c: CampaignId, chunk: u32) -> Vec<u8> {
    in_project(p, b"/cpa/", &[c.as_bytes(), &chunk.to_be_bytes()])
}

/// A campaign's emails still in the outbox, so that a cancel finds them without
/// reading every waiting email of the project.
pub fn campaign_queued(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cpq/", &[c.as_bytes()])
}

pub fn campaign_queued_email(p: ProjectId, c: CampaignId, e: EmailId) -> Vec<u8> {
    in_project(p, b"/cpq/", &[c.as_bytes(), e.as_bytes()])
}

/// A contact who unsubscribed through a campaign's link (counted once).
pub fn campaign_unsubscribed(p: ProjectId, c: CampaignId, contact: ContactId) -> Vec<u8> {
    in_project(p, b"/cpu/", &[c.as_bytes(), contact.as_bytes()])
}

/// Every campaign's unsubscribe markers of the project.
pub fn campaign_unsubscribed_all(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/cpu/", &[])
}

/// A campaign's unsubscribe markers, for the retention purge.
pub fn campaign_unsubscribes(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cpu/", &[c.as_bytes()])
}

/// Present once retention removed a campaign's unsubscribe markers: its count is closed
/// (retention/unsubscribes.rs).
pub fn campaign_unsubscribes_closed(p: ProjectId, c: CampaignId) -> Vec<u8> {
    in_project(p, b"/cpx/", &[c.as_bytes()])
}

/// A contact an unsubscribe link unsubscribed; its value is the contact's `updatedAt`
/// then, so a resubscribe link undoes only that change (not a later bounce or an API
/// write).
pub fn link_unsubscribed(p: ProjectId, contact: ContactId) -> Vec<u8> {
    in_project(p, b"/lun/", &[contact.as_bytes()])
}

/// Every SENDING campaign of every project: what start-up resumes.
pub const SENDING_CAMPAIGNS: &[u8] = b"campaigns-sending/";

pub fn sending_campaign(p: ProjectId, c: CampaignId) -> Vec<u8> {
    key([SENDING_CAMPAIGNS, p.as_bytes(), c.as_bytes()].into_iter())
}

/// (project, campaign) of a `sending_campaign` key.
pub fn parse_sending_campaign(k: &[u8]) -> Option<(ProjectId, CampaignId)> {
    let rest = k.strip_prefix(SENDING_CAMPAIGNS)?;
    if rest.len() != 32 {
        return None;
    }
    Some((id_after(&rest[..16], b"")?, id_after(&rest[16..], b"")?))
}

/// Contacts being erased (`erasure::erase`), of every project: what start-up resumes.
/// The value is the erasure's progress.
pub const ERASURES: &[u8] = b"erasures/";

pub fn erasure(p: ProjectId, c: ContactId) -> Vec<u8> {
    key([ERASURES, p.as_bytes(), c.as_bytes()].into_iter())
}

/// (project, contact) of an `erasure` key.
pub fn parse_erasure(k: &[u8]) -> Option<(ProjectId, ContactId)> {
    let rest = k.strip_prefix(ERASURES)?;
    if rest.len() != 32 {
        return None;
    }
    Some((id_after(&rest[..16], b"")?, id_after(&rest[16..], b"")?))
}

/// Contact imports, outside the projects so that start-up finds the unfinished ones
/// with one scan.
pub const IMPORTS: &[u8] = b"imports/";

pub fn import(p: ProjectId, i: ImportId) -> Vec<u8> {
    key([IMPORTS, p.as_bytes(), i.as_bytes()].into_iter())
}

/// Every import of one project.
pub fn imports_of(p: ProjectId) -> Vec<u8> {
    key([IMPORTS, p.as_bytes()].into_iter())
}

/// (project, import) of an `import` key.
pub fn parse_import(k: &[u8]) -> Option<(ProjectId, ImportId)> {
    let rest = k.strip_prefix(IMPORTS)?;
    if rest.len() != 32 {
        return None;
    }
    Some((id_after(&rest[..16], b"")?, id_after(&rest[16..], b"")?))
}

/// An import's CSV, in numbered chunks (big-endian, so they sort in order).
pub fn import_chunk(p: ProjectId, i: ImportId, n: u32) -> Vec<u8> {
    in_project(p, b"/ic/", &[i.as_bytes(), &n.to_be_bytes()])
}

pub fn workflows(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/wf/", &[])
}

pub fn workflow(p: ProjectId, w: WorkflowId) -> Vec<u8> {
    in_project(p, b"/wf/", &[w.as_bytes()])
}

/// The enabled workflows that an event name starts (`workflow::Trigger`s): one point
/// read per event name on the write path.
pub fn triggers(p: ProjectId, event: &str) -> Vec<u8> {
    in_project(p, b"/wtr/", &[event.as_bytes()])
}

/// Every execution record of a project, in id (start) order: what retention walks.
pub fn executions(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/wx/", &[])
}

/// An execution's record, by its id alone (timers and the ready queue name it so).
pub fn execution(p: ProjectId, x: ExecutionId) -> Vec<u8> {
    in_project(p, b"/wx/", &[x.as_bytes()])
}

/// A workflow's executions by contact, each contact's in start order: the listing of
/// `GET /workflows/{id}/executions` and the re-entry check (a contact's last one) in
/// one index, so starting an execution writes one key less.
pub fn executions_of(p: ProjectId, w: WorkflowId) -> Vec<u8> {
    in_project(p, b"/wxl/", &[w.as_bytes()])
}

pub fn executions_of_contact(p: ProjectId, w: WorkflowId, c: ContactId) -> Vec<u8> {
    in_project(p, b"/wxl/", &[w.as_bytes(), c.as_bytes()])
}

pub fn execution_of(p: ProjectId, w: WorkflowId, c: ContactId, x: ExecutionId) -> Vec<u8> {
    in_project(p, b"/wxl/", &[w.as_bytes(), c.as_bytes(), x.as_bytes()])
}

/// A contact's entries into one re-entry workflow within the current day window
/// (`executions::Entries`): what the daily cap counts. Apart from the executions'
/// index, so that pruning ended executions cannot reset it; deleted with the workflow.
pub fn all_entries(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/wxd/", &[])
}

pub fn entries_of(p: ProjectId, w: WorkflowId) -> Vec<u8> {
    in_project(p, b"/wxd/", &[w.as_bytes()])
}

pub fn entries(p: ProjectId, w: WorkflowId, c: ContactId) -> Vec<u8> {
    in_project(p, b"/wxd/", &[w.as_bytes(), c.as_bytes()])
}

/// The execution id at the end of an `execution_of` key.
pub fn execution_in(k: &[u8]) -> Option<ExecutionId> {
    let at = k.len().checked_sub(16)?;
    id_after(&k[at..], b"")
}

/// Executions of a contact waiting for an event (WAIT_FOR_EVENT).
pub fn waiting_for(p: ProjectId, event: &str, c: ContactId) -> Vec<u8> {
    in_project(p, b"/wxe/", &[event.as_bytes(), b"\0", c.as_bytes()])
}

pub fn waiting(p: ProjectId, event: &str, c: ContactId, x: ExecutionId) -> Vec<u8> {
    in_project(
        p,
        b"/wxe/",
        &[event.as_bytes(), b"\0", c.as_bytes(), x.as_bytes()],
    )
}

/// Executions with a step to run now, of every project: the executors' queue.
pub const READY: &[u8] = b"wf-ready/";

pub fn ready(p: ProjectId, x: ExecutionId) -> Vec<u8> {
    key([READY, p.as_bytes(), x.as_bytes()].into_iter())
}

/// (project, execution) of a `ready` key.
pub fn parse_ready(k: &[u8]) -> Option<(ProjectId, ExecutionId)> {
    let rest = k.strip_prefix(READY)?;
    if rest.len() != 32 {
        return None;
    }
    Some((id_after(&rest[..16], b"")?, id_after(&rest[16..], b"")?))
}

/// Durable timers (see `crate::scheduler`): `timers/<due ms, 8 bytes big-endian><kind>
/// <project><target>`, so a forward scan yields the earliest first.
pub const TIMERS: &[u8] = b"timers/";

pub fn timer(due_ms: i64, kind: u8, p: ProjectId, target: &[u8; 16]) -> Vec<u8> {
    let due = (due_ms.max(0) as u64).to_be_bytes();
    key([TIMERS, &due[..], &[kind][..], p.as_bytes(), &target[..]].into_iter())
}

/// (due, kind, project, target) of a timer key.
pub fn parse_timer(k: &[u8]) -> Option<(i64, u8, ProjectId, [u8; 16])> {
    let rest = k.strip_prefix(TIMERS)?;
    if rest.len() != 8 + 1 + 16 + 16 {
        return None;
    }
    let due = u64::from_be_bytes(rest[..8].try_into().ok()?);
    Some((
        i64::try_from(due).ok()?,
        rest[8],
        id_after(&rest[9..25], b"")?,
        rest[25..].try_into().ok()?,
    ))
}

/// The secret that signs unsubscribe and tracking links, made at first start.
pub const LINK_KEY: &[u8] = b"meta/link-key";

/// A project's link generation (`link_generation`).
pub fn link_state(p: ProjectId) -> Vec<u8> {
    in_project(p, b"/lk/", &[])
}

/// The outbox: `outbox/<due ms, 8 bytes big-endian><project><email>`, so a forward scan
/// yields what is due first.
pub const OUTBOX: &[u8] = b"outbox/";

pub fn outbox(due_ms: i64, p: ProjectId, e: EmailId) -> Vec<u8> {
    let due = (due_ms.max(0) as u64).to_be_bytes();
    key([OUTBOX, p.as_bytes(), &due[..], e.as_bytes()].into_iter())
}

/// One project's outbox, in due order: `outbox/<project><due><email>`. Grouped by
/// project, so the dispatcher reads the head of each project's queue and jumps to the
/// next, instead of walking past every waiting email of a paced project.
pub fn outbox_of(p: ProjectId) -> Vec<u8> {
    key([OUTBOX, p.as_bytes()].into_iter())
}

/// A key above every outbox key of `p` and below the next project's.
pub fn outbox_after(p: ProjectId) -> Vec<u8> {
    key([OUTBOX, p.as_bytes(), &[0xff; 24][..]].into_iter())
}

/// (due, project, email) of an outbox key.
pub fn parse_outbox(k: &[u8]) -> Option<(i64, ProjectId, EmailId)> {
    let rest = k.strip_prefix(OUTBOX)?;
    if rest.len() != 16 + 8 + 16 {
        return None;
    }
    let due = u64::from_be_bytes(rest[16..24].try_into().ok()?);
    Some((
        i64::try_from(due).ok()?,
        id_after(&rest[..16], b"")?,
        id_after(&rest[24..], b"")?,
    ))
}

/// The project a key belongs to, None for a global key (`projects/`, `keys/`, `meta/`).
/// A node of a cluster holds only the projects it owns, and this is how it tells: every
/// project's key starts with `p/<project>`, except the global indexes that embed the
/// project, each at a fixed offset (all after their tag, the timers after due and kind).
/// A new layout with a project in it must be added here (the test lists them all).
pub fn project_of(key: &[u8]) -> Option<ProjectId> {
    const EMBEDDED_AT_TAG: [&[u8]; 6] = [
        OUTBOX,
        SENDING_CAMPAIGNS,
        ERASURES,
        IMPORTS,
        READY,
        ALL_DOMAINS,
    ];
    let rest = if let Some(rest) = key.strip_prefix(b"p/") {
        rest
    } else if let Some(rest) = key.strip_prefix(TIMERS) {
        rest.get(8 + 1..)?
    } else if let Some(rest) = key.strip_prefix(WEBHOOK_DUE) {
        rest.get(8..)?
    } else {
        EMBEDDED_AT_TAG
            .iter()
            .find_map(|tag| key.strip_prefix(*tag))?
    };
    let id: [u8; 16] = rest.get(..16)?.try_into().ok()?;
    Some(ProjectId::from_key_bytes(id))
}

/// The global keys' prefixes (every key outside a project's `p/<id>`), with what each
/// holds.
pub(crate) const GLOBAL: &[(&[u8], &str)] = &[
    (PROJECTS, "projects"),
    (API_KEYS, "api keys"),
    (ALL_DOMAINS, "domain index"),
    (SENDING_CAMPAIGNS, "sending campaigns"),
    (ERASURES, "erasures"),
    (IMPORTS, "imports"),
    (READY, "ready executions"),
    (TIMERS, "timers"),
    (OUTBOX, "outbox"),
    (b"meta/", "meta"),
    (SESSIONS, "dashboard sessions"),
    (WEBHOOK_DUE, "webhook queue"),
];

/// What kind of record `key` is, in words: the tallies of a migration.
pub fn kind_of(key: &[u8]) -> &'static str {
    const PER_PROJECT: &[(&[u8], &str)] = &[
        (b"/c/", "contacts"),
        (b"/ce/", "contact email index"),
        (b"/n/", "counters"),
        (b"/e/", "event blocks"),
        (b"/ec/", "events by contact"),
        (b"/en/", "events by name"),
        (b"/names/", "event names"),
        (b"/nc/", "contact event statistics"),
        (b"/s/", "segments"),
        (b"/sm/", "segment members"),
        (b"/t/", "templates"),
        (b"/tt/", "template texts"),
        (b"/m/", "emails"),
        (b"/mt/", "email texts"),
        (b"/mx/", "engagements"),
        (b"/att/", "attachments"),
        (b"/att-users/", "attachment users"),
        (b"/idem/", "idempotency records"),
        (b"/idem-exp/", "idempotency expiries"),
        (b"/d/", "domains"),
        (b"/dn/", "domain names"),
        (b"/cp/", "campaigns"),
        (b"/cps/", "campaign statistics"),
        (b"/cpa/", "campaign audiences"),
        (b"/cpq/", "campaign queues"),
        (b"/cpu/", "campaign unsubscribes"),
        (b"/cpp/", "campaign pauses"),
        (b"/ddm/", "domain DMARC and return-path checks"),
        (b"/cpr/", "campaign resumes"),
        (b"/cpx/", "campaign unsubscribes closed"),
        (b"/lun/", "link unsubscribes"),
        (b"/ic/", "import chunks"),
        (b"/wf/", "workflows"),
        (b"/wtr/", "workflow triggers"),
        (b"/wx/", "workflow executions"),
        (b"/wxl/", "executions by contact"),
        (b"/wxd/", "workflow entries"),
        (b"/wxe/", "workflow waits"),
        (b"/lk/", "link state"),
        (b"/pace/", "paces"),
        (b"/wh/", "webhooks"),
        (b"/whd/", "webhook deliveries"),
        (b"/whc/", "webhook cursors"),
        (b"/sup/", "suppressions"),
        (b"/supt/", "suppressions by time"),
        (b"/supn/", "suppression counts"),
        (b"/sbn/", "soft bounces"),
        (b"/fbs/", "delivery reports seen"),
        (b"/fq/", "quarantined reports"),
        (b"/fqe/", "emails with a quarantined report"),
        (b"/rep/", "reputation"),
    ];
    if let Some(rest) = key.strip_prefix(b"p/").and_then(|r| r.get(16..)) {
        return PER_PROJECT
            .iter()
            .find(|(tag, _)| rest.starts_with(tag))
            .map_or("other project records", |(_, name)| name);
    }
    GLOBAL
        .iter()
        .find(|(tag, _)| key.starts_with(tag))
        .map_or("other", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventId;

    #[test]
    fn a_key_is_named_by_its_kind() {
        let p = ProjectId::new();
        assert_eq!(kind_of(&contacts(p)), "contacts");
        assert_eq!(
            kind_of(&contact_by_email(p, "a@b.c")),
            "contact email index"
        );
        assert_eq!(kind_of(&project(p)), "projects");
        assert_eq!(kind_of(&import(p, ImportId::new())), "imports");
        assert_eq!(kind_of(b"zzz"), "other");
    }

    #[test]
    fn ids_read_back_from_keys_and_indexes_do_not_overlap() {
        let (p, c, e) = (ProjectId::new(), ContactId::new(), EventId::new());
        assert_eq!(id_after::<ContactId>(&contact(p, c), &contacts(p)), Some(c));
        let by_contact = with_id(&events_by_contact(p, c), e.as_bytes());
        assert_eq!(
            id_after::<EventId>(&by_contact, &events_by_contact(p, c)),
            Some(e)
        );
        assert!(!contact_by_email(p, "a@b.c").starts_with(&contacts(p)));
        assert!(!by_contact.starts_with(&events(p)));
        assert!(
            !with_id(&events_by_name(p, "ab"), e.as_bytes()).starts_with(&events_by_name(p, "a"))
        );
        let d = DomainId::new();
        assert_eq!(parse_domain_index(&domain_index(p, d)), Some((p, d)));
    }

    #[test]
    fn outbox_keys_round_trip_and_sort_by_due_time() {
        let (p, e) = (ProjectId::new(), EmailId::new());
        assert_eq!(parse_outbox(&outbox(42, p, e)), Some((42, p, e)));
        assert!(outbox(9, p, e) < outbox(10, p, e));
        assert!(outbox(255, p, e) < outbox(256, p, e));
    }

    #[test]
    fn every_key_of_a_project_names_it_and_global_keys_name_none() {
        let p = ProjectId::new();
        let (c, e, s, t) = (
            ContactId::new(),
            EmailId::new(),
            SegmentId::new(),
            TemplateId::new(),
        );
        let (d, cp, i, w, x) = (
            DomainId::new(),
            CampaignId::new(),
            ImportId::new(),
            WorkflowId::new(),
            ExecutionId::new(),
        );
        let ev = EventId::new();
        let of_project = [
            contacts(p),
            contact(p, c),
            contact_by_email(p, "a@b.c"),
            counter(p, "contacts"),
            events(p),
            with_id(&events(p), ev.as_bytes()),
            events_by_contact(p, c),
            events_by_name(p, "signup"),
            event_names(p),
            event_name(p, "signup"),
            contact_event_stats_by_name(p, "signup"),
            contact_event_stats(p, "signup", c),
            segments(p),
            segment(p, s),
            segment_members(p, s),
            segment_member(p, s, c),
            templates(p),
            template(p, t),
            template_text(p, t),
            emails(p),
            email(p, e),
            email_text(p, e),
            engagement(p, e),
            attachments(p, e),
            attachment_users(p, e),
            idempotency(p, "send", "k"),
            idempotency_records(p),
            idempotency_expiries(p),
            idempotency_expiry(p, 42, "send", "k"),
            domains(p),
            domain(p, d),
            domain_by_name(p, "example.com"),
            domain_index(p, d),
            campaigns(p),
            campaign(p, cp),
            campaign_stats(p, cp),
            campaign_audiences(p),
            campaign_audience(p, cp),
            campaign_audience_chunk(p, cp, 7),
            campaign_queued(p, cp),
            campaign_queued_email(p, cp, e),
            campaign_unsubscribed(p, cp, c),
            campaign_unsubscribed_all(p),
            campaign_unsubscribes(p, cp),
            campaign_unsubscribes_closed(p, cp),
            link_unsubscribed(p, c),
            sending_campaign(p, cp),
            erasure(p, c),
            import(p, i),
            imports_of(p),
            import_chunk(p, i, 3),
            workflows(p),
            workflow(p, w),
            triggers(p, "signup"),
            executions(p),
            execution(p, x),
            executions_of(p, w),
            executions_of_contact(p, w, c),
            execution_of(p, w, c, x),
            all_entries(p),
            entries_of(p, w),
            entries(p, w, c),
            waiting_for(p, "signup", c),
            waiting(p, "signup", c, x),
            ready(p, x),
            timer(1_700_000_000_000, 2, p, x.as_bytes()),
            timer(0, 0, p, &[0xff; 16]),
            link_state(p),
            outbox(1_700_000_000_000, p, e),
            outbox_of(p),
            outbox_after(p),
        ];
        for k in &of_project {
            assert_eq!(project_of(k), Some(p), "{}", String::from_utf8_lossy(k));
        }
        let global = [
            project(p),
            PROJECTS.to_vec(),
            key_hash(&[7; 32]),
            FORMAT_KEY.to_vec(),
            UPGRADE_PROGRESS_KEY.to_vec(),
            LINK_KEY.to_vec(),
            // A prefix too short to hold a project is a scan bound, not a key of one.
            OUTBOX.to_vec(),
            TIMERS.to_vec(),
            b"p/short".to_vec(),
        ];
        for k in &global {
            assert_eq!(project_of(k), None, "{}", String::from_utf8_lossy(k));
        }
    }
}
