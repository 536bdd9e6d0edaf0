//! Contact writes. Each builds one atomic batch (a `WriteUnit`): the record, the email
//! index, the counters behind `total`, any `contact.subscribed` /
//! `contact.unsubscribed` event (recorded only when the flag really changes), the
//! events the caller adds (a tracked event), and the segment entries and exits the
//! change causes. A write that changes more (a send, a bounce) prepares its changes
//! here and stages them in its own unit.

use crate::error::{Error, Resource, Result};
use crate::model::{Contact, ContactId, DataMap, DataPatch, EmailAddress, Event, ProjectId};
pub use crate::project::counters::{read_counter, ProjectCounts};
use crate::project::limits::json_len;
pub use crate::project::unit::{Change, WriteUnit};
pub use crate::project::write::WriteCtx;
use crate::store::{codec, keys, Batch, Store};
use serde_json::{Map, Value};

pub fn find_id_by_email(store: &dyn Store, p: ProjectId, email: &str) -> Result<Option<ContactId>> {
    let Some(id) = store.get(&keys::contact_by_email(p, email))? else {
        return Ok(None);
    };
    std::str::from_utf8(&id)
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Some)
        .ok_or_else(|| Error::storage("bad email index entry"))
}

pub fn load(store: &dyn Store, p: ProjectId, id: ContactId) -> Result<Option<Contact>> {
    store
        .get(&keys::contact(p, id))?
        .map(|b| Contact::decode(&b))
        .transpose()
}

/// Creates or updates the contact with this email, in memory.
pub fn prepare_upsert(
    ctx: &WriteCtx,
    counts: ProjectCounts,
    email: &EmailAddress,
    subscribed: Option<bool>,
    default_subscribed: bool,
    data: &DataPatch,
) -> Result<Change> {
    let before = ctx.table.by_email(email.as_str())?;
    let mut after = match &before {
        Some(c) => c.clone(),
        None => Contact {
            id: ContactId::new(),
            email: email.clone(),
            subscribed: default_subscribed,
            data: DataMap::new(),
            created_at: ctx.now,
            updated_at: ctx.now,
        },
    };
    if before.is_none() && counts.contacts >= ctx.limits.max_contacts {
        return Err(crate::project::limits::full(
            "contacts",
            ctx.limits.max_contacts,
            "max_contacts",
        ));
    }
    if let Some(s) = subscribed {
        after.subscribed = s;
    }
    let mut next = counts;
    if !data.is_empty() {
        let old = before.as_ref().map_or(0, |c| json_len(&c.data));
        data.apply(&mut after.data);
        let new = json_len(&after.data);
        ctx.limits.check_data(new)?;
        next.data_bytes = ctx.limits.check_project_data(counts.data_bytes, old, new)?;
    }
    after.updated_at = ctx.now;
    if before.is_none() {
        next.contacts += 1;
    }
    adjust_subscribed(
        &mut next,
        before.as_ref().map(|c| c.subscribed),
        after.subscribed,
    );
    Ok(Change {
        before,
        after,
        counts_before: counts,
        counts: next,
        note: Map::new(),
    })
}

pub fn upsert(
    ctx: &WriteCtx,
    counts: &mut ProjectCounts,
    msg: UpsertContact,
) -> Result<UpsertOutcome> {
    let change = prepare_upsert(
        ctx,
        *counts,
        &msg.email,
        msg.subscribed,
        msg.default_subscribed,
        &msg.data,
    )?;
    commit(ctx, &change, Batch::new(), Vec::new())?;
    *counts = change.counts;
    Ok(UpsertOutcome {
        is_new: change.is_new(),
        contact: change.after,
    })
}

pub fn patch(ctx: &WriteCtx, counts: &mut ProjectCounts, msg: PatchContact) -> Result<Contact> {
    let change = prepare_patch(ctx, *counts, msg)?;
    commit(ctx, &change, Batch::new(), Vec::new())?;
    *counts = change.counts;
    Ok(change.after)
}

/// Changes a contact's flag or data, in memory.
pub fn prepare_patch(ctx: &WriteCtx, counts: ProjectCounts, msg: PatchContact) -> Result<Change> {
    let before = ctx
        .table
        .get(msg.id)?
        .ok_or(Error::NotFound(Resource::Contact))?;
    let mut after = before.clone();
    if let Some(s) = msg.subscribed {
        after.subscribed = s;
    }
    let mut next = counts;
    if !msg.data.is_empty() {
        let old = json_len(&after.data);
        msg.data.apply(&mut after.data);
        let new = json_len(&after.data);
        ctx.limits.check_data(new)?;
        next.data_bytes = ctx.limits.check_project_data(counts.data_bytes, old, new)?;
    }
    after.updated_at = ctx.now;
    adjust_subscribed(&mut next, Some(before.subscribed), after.subscribed);
    let mut note = Map::new();
    if let Some(reason) = msg.reason {
        note.insert("reason".into(), Value::String(reason));
    }
    if let Some(c) = msg.campaign {
        note.insert("campaignId".into(), Value::String(c.to_string()));
    }
    Ok(Change {
        before: Some(before),
        after,
        counts_before: counts,
        counts: next,
        note,
    })
}

/// Writes a prepared change in one batch, with `batch` (which the caller may have
/// started, e.g. with an idempotent reply) and the caller's `events`.
pub fn commit(ctx: &WriteCtx, change: &Change, batch: Batch, events: Vec<Event>) -> Result<()> {
    let mut unit = WriteUnit::with(batch, events, change.counts_before);
    unit.stage(ctx, change)?;
    unit.apply(ctx).map(drop)
}

/// Writes many prepared changes in one batch (a bulk import). Each was prepared from
/// the counters the one before left (`counts_before` of one is `counts` of the one
/// before), and no two are of the same contact: a batch cannot read its own writes.
pub fn commit_all(ctx: &WriteCtx, changes: &[Change], batch: Batch) -> Result<()> {
    let Some(first) = changes.first() else {
        return ctx.store.apply(batch).map(drop);
    };
    let mut unit = WriteUnit::with(batch, Vec::new(), first.counts_before);
    for change in changes {
        unit.stage(ctx, change)?;
    }
    unit.apply(ctx).map(drop)
}

pub fn delete(ctx: &WriteCtx, counts: &mut ProjectCounts, id: ContactId) -> Result<()> {
    let (store, p) = (ctx.store, ctx.project);
    let contact = ctx
        .table
        .get(id)?
        .ok_or(Error::NotFound(Resource::Contact))?;
    let mut next = *counts;
    next.contacts = next.contacts.saturating_sub(1);
    next.data_bytes = next.data_bytes.saturating_sub(json_len(&contact.data));
    if contact.subscribed {
        next.subscribed = next.subscribed.saturating_sub(1);
    }
    let mut batch = Batch::new();
    batch.delete(keys::contact(p, id));
    batch.delete(keys::contact_by_email(p, contact.email.as_str()));
    // A deleted contact leaves what the features keep of it (its STATIC segments).
    ctx.states.on_contact_delete(store, &mut batch, p, id)?;
    ctx.hooks
        .run_contact_deleted(store, &mut batch, p, &contact)?;
    next.write_changed(counts, &mut batch, p);
    // The rest of its data goes in slices, from this durable record (`erasure`).
    let erasure = super::erasure_record::Erasure::new(contact.email.as_str());
    batch.put(keys::erasure(p, id), codec::encode(&erasure)?);
    store.apply(batch)?;
    ctx.table.remove(&contact);
    *counts = next;
    Ok(())
}

fn adjust_subscribed(counts: &mut ProjectCounts, before: Option<bool>, after: bool) {
    match (before.unwrap_or(false), after) {
        (false, true) => counts.subscribed += 1,
        (true, false) => counts.subscribed = counts.subscribed.saturating_sub(1),
        _ => {}
    }
}

/// Create or update a contact by email.
#[derive(Debug)]
pub struct UpsertContact {
    pub email: EmailAddress,
    /// None keeps the current flag; a new contact then gets `default_subscribed`.
    pub subscribed: Option<bool>,
    pub default_subscribed: bool,
    pub data: DataPatch,
}

#[derive(Debug, Clone)]
pub struct UpsertOutcome {
    pub contact: Contact,
    pub is_new: bool,
}

#[derive(Debug)]
pub struct PatchContact {
    pub id: ContactId,
    pub subscribed: Option<bool>,
    pub data: DataPatch,
    /// Why the flag changes, when the engine changes it (`bounce`, `link`).
    pub reason: Option<String>,
    /// The campaign whose link or email caused the change.
    pub campaign: Option<crate::model::CampaignId>,
}
