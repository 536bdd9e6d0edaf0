//! The unsubscribe link: what its page shows a recipient (who sends the mail, and which
//! address it goes to, partly masked: whoever holds a forwarded email sees the page
//! too), and the unsubscribe and resubscribe it makes.

use crate::campaign::records::{self as campaigns, load};
use crate::campaign::stats as campaign_stats;
use crate::contact::records::{self as contacts, PatchContact, ProjectCounts, WriteCtx, WriteUnit};
use crate::error::Result;
use crate::model::{CampaignId, ContactId, DataPatch, EmailAddress, ProjectId};
use crate::project::apply::Apply;
use crate::project::table::ContactTable;
use crate::project::Registry;
use crate::store::{codec, keys, Store};

/// The sender as the email named it: a campaign's `fromName` and `from`; mail outside a
/// campaign (or of a deleted one) names the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub name: Option<String>,
    pub address: Option<EmailAddress>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    pub sender: Sender,
    /// None once the contact is gone (erased or deleted).
    pub masked: Option<String>,
    pub subscribed: bool,
}

/// `a***@example.com`: the first character of the local part, then `***`.
pub fn mask(email: &EmailAddress) -> String {
    let first: String = email.local_part().chars().take(1).collect();
    format!("{first}***@{}", email.domain())
}

pub fn recipient(
    store: &dyn Store,
    table: &ContactTable,
    project: ProjectId,
    contact: ContactId,
    campaign: Option<CampaignId>,
) -> Result<Recipient> {
    let from_campaign = match campaign {
        Some(id) => campaigns::load(store, project, id)?,
        None => None,
    };
    let sender = match from_campaign {
        Some(c) => Sender {
            name: c.from_name.filter(|n| !n.trim().is_empty()),
            address: Some(c.from),
        },
        None => Sender {
            name: project_name(store, project)?,
            address: None,
        },
    };
    let contact = table.get(contact)?;
    Ok(Recipient {
        sender,
        masked: contact.as_ref().map(|c| mask(&c.email)),
        subscribed: contact.is_some_and(|c| c.subscribed),
    })
}

fn project_name(store: &dyn Store, project: ProjectId) -> Result<Option<String>> {
    Ok(match store.get(&keys::project(project))? {
        Some(b) => Some(codec::decode::<crate::model::Project>(&b)?.name),
        None => None,
    })
}

/// An unsubscribe link was used: the contact is unsubscribed (once; a second use
/// changes nothing), and the campaign counts it once.
pub fn unsubscribe(
    ctx: &WriteCtx,
    counts: &mut ProjectCounts,
    contact: ContactId,
    campaign: Option<CampaignId>,
) -> Result<()> {
    let (store, p) = (ctx.store, ctx.project);
    let Some(c) = ctx.table.get(contact)? else {
        return Ok(());
    };
    // The contact's change, the campaign's count and its marker, in one batch.
    let mut unit = WriteUnit::new(*counts);
    if c.subscribed {
        let patch = PatchContact {
            id: contact,
            subscribed: Some(false),
            data: DataPatch::default(),
            reason: Some("unsubscribe_link".into()),
            campaign,
        };
        let change = contacts::prepare_patch(ctx, unit.counts(), patch)?;
        unit.stage(ctx, &change)?;
        unit.batch.put(
            keys::link_unsubscribed(p, contact),
            ctx.now.millis().to_be_bytes().to_vec(),
        );
    }
    if let Some(id) = campaign {
        let key = keys::campaign_unsubscribed(p, id, contact);
        let closed = store
            .get(&keys::campaign_unsubscribes_closed(p, id))?
            .is_some();
        if !closed && load(store, p, id)?.is_some() && store.get(&key)?.is_none() {
            unit.batch.put(key, Vec::new());
            campaign_stats::update(store, &mut unit.batch, p, id, |s| s.unsubscribed += 1)?;
        }
    }
    *counts = unit.apply(ctx)?;
    Ok(())
}

/// The resubscribe button of the page an unsubscribe link answers: the contact is
/// subscribed again, but only when an unsubscribe link made the contact's last change
/// (so a bounce, or a tenant's own unsubscribe, is not undone by whoever holds the
/// email). A campaign's own unsubscribe is taken back: its count and its marker, so
/// `stats.unsubscribed` counts recipients who left through its link and stayed away.
/// Answers whether the contact is subscribed now.
pub fn resubscribe(
    ctx: &WriteCtx,
    counts: &mut ProjectCounts,
    contact: ContactId,
    campaign: Option<CampaignId>,
) -> Result<bool> {
    let (store, p) = (ctx.store, ctx.project);
    let Some(c) = ctx.table.get(contact)? else {
        return Ok(false);
    };
    if c.subscribed {
        return Ok(true);
    }
    let marker = keys::link_unsubscribed(p, contact);
    let by_link = store
        .get(&marker)?
        .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
        .is_some_and(|at| i64::from_be_bytes(at) == c.updated_at.millis());
    if !by_link {
        return Ok(false);
    }
    let mut unit = WriteUnit::new(*counts);
    let patch = PatchContact {
        id: contact,
        subscribed: Some(true),
        data: DataPatch::default(),
        reason: Some("resubscribe_link".into()),
        campaign,
    };
    let change = contacts::prepare_patch(ctx, unit.counts(), patch)?;
    unit.stage(ctx, &change)?;
    unit.batch.delete(marker);
    if let Some(id) = campaign {
        let key = keys::campaign_unsubscribed(p, id, contact);
        if load(store, p, id)?.is_some() && store.get(&key)?.is_some() {
            unit.batch.delete(key);
            campaign_stats::update(store, &mut unit.batch, p, id, |s| {
                s.unsubscribed = s.unsubscribed.saturating_sub(1)
            })?;
        }
    }
    *counts = unit.apply(ctx)?;
    Ok(true)
}

/// The link's unsubscribe, in the project's actor, answered once durable.
pub async fn unsubscribe_contact(
    registry: &Registry,
    p: ProjectId,
    contact: ContactId,
    campaign: Option<CampaignId>,
) -> Result<()> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, counts| unsubscribe(ctx, counts, contact, campaign)),
        )
        .await
}

/// The page's resubscribe, in the project's actor; answers whether the contact is
/// subscribed now.
pub async fn resubscribe_contact(
    registry: &Registry,
    p: ProjectId,
    contact: ContactId,
    campaign: Option<CampaignId>,
) -> Result<bool> {
    registry
        .send(
            p,
            Apply::durable(move |ctx, counts| resubscribe(ctx, counts, contact, campaign)),
        )
        .await
}

/// The contact-deleted hook: the marker an unsubscribe link left goes with the contact,
/// in its delete batch (it names the contact's id, and nothing reads it afterwards).
pub(crate) fn on_contact_deleted(
    _store: &dyn crate::store::Store,
    batch: &mut crate::store::Batch,
    p: ProjectId,
    contact: &crate::model::Contact,
) -> Result<()> {
    forget_marker(batch, p, contact.id);
    Ok(())
}

/// Drops the contact's marker (idempotent). The erasure's last step calls it too: a
/// contact deleted by a version before the hook has its marker still, until its
/// erasure (resumed after the upgrade) ends.
pub(crate) fn forget_marker(batch: &mut crate::store::Batch, p: ProjectId, contact: ContactId) {
    batch.delete(keys::link_unsubscribed(p, contact));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_address_keeps_the_first_character_and_the_domain() {
        let m = |s: &str| mask(&EmailAddress::parse(s).unwrap());
        assert_eq!(m("alice@example.com"), "a***@example.com");
        assert_eq!(m("b@example.org"), "b***@example.org");
        assert_eq!(m("émile@exemple.fr"), "é***@exemple.fr");
    }
}
