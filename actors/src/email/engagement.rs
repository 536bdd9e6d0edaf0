//! Opens and clicks of an email: its counts beside its record, an event each time,
//! and its campaign's stats the first time.

use serde_json::Value;

use crate::email::sending;
use crate::error::Result;
use crate::model::{EmailId, Engagement, Event, ProjectId};
use crate::project::apply::Apply;
use crate::project::events;
use crate::project::write::WriteCtx;
use crate::project::Registry;
use crate::store::{codec, keys, Batch, Store};

pub use crate::model::Hit;

/// The tracked opens and clicks of an email (zero when none was recorded).
pub fn engagement(store: &dyn Store, p: ProjectId, email: EmailId) -> Result<Option<Engagement>> {
    store
        .get(&keys::engagement(p, email))?
        .map(|b| codec::decode(&b))
        .transpose()
}

/// Records an open or a click: an event every time, the email's counts, and the
/// campaign's stats the first time for that email. Only the first hit reads the
/// email's record; every hit writes a few bytes beside it.
pub fn engage(ctx: &WriteCtx, email_id: EmailId, hit: Hit, url: Option<String>) -> Result<()> {
    let (store, p, now) = (ctx.store, ctx.project, ctx.now);
    let mut e = match engagement(store, p, email_id)? {
        Some(e) => e,
        None => match sending::load_email(store, p, email_id)? {
            Some(email) => Engagement::of(&email),
            None => return Ok(()),
        },
    };
    let (count, first_at) = match hit {
        Hit::Open => (&mut e.opens, &mut e.opened_at),
        Hit::Click => (&mut e.clicks, &mut e.clicked_at),
    };
    *count = count.saturating_add(1);
    let first = first_at.is_none();
    first_at.get_or_insert(now.millis());
    let mut batch = Batch::new();
    batch.put(keys::engagement(p, email_id), codec::encode(&e)?);
    if first {
        // Its campaign counts the first open and the first click.
        ctx.hooks.after_first_hit(store, &mut batch, p, &e, hit)?;
    }
    // The hit is counted whatever the address; an erased contact gets no event.
    if let Some(to) = e.to.address() {
        let name = match hit {
            Hit::Open => "email.open",
            Hit::Click => "email.click",
        };
        let mut ev = Event::system(name, e.contact_id, to, now);
        ev.data
            .insert("emailId".into(), Value::String(email_id.to_string()));
        if let Some(c) = e.campaign_id {
            ev.data
                .insert("campaignId".into(), Value::String(c.to_string()));
        }
        if let Some(url) = url {
            ev.data.insert("url".into(), Value::String(url));
        }
        events::append_all(ctx, &mut batch, &[ev])?;
    }
    store.apply(batch).map(drop)
}

/// Records a hit in the project's actor. The answer does not wait for the flush: a
/// crash may lose an open, which is bookkeeping nobody acknowledged.
pub async fn record(
    registry: &Registry,
    p: ProjectId,
    email: EmailId,
    hit: Hit,
    url: Option<String>,
) -> Result<()> {
    registry
        .send(
            p,
            Apply::applied(move |ctx, _| engage(ctx, email, hit, url)),
        )
        .await
}
