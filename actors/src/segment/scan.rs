//! Running compiled filters over a project's stored contacts.
//!
//! This is the hot loop behind `memberCount`: each stored contact is read in its light
//! form (`ContactRef`, borrowing from the stored bytes), and only the top-level `data`
//! keys a filter names are parsed out of the JSON text; the rest of the text is
//! skipped without building values. Event conditions read per-contact statistics that
//! were loaded once, before the scan, from the per-name index.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use serde_json::Value;

use super::eval::{Compiled, Subject};
use crate::error::Result;
pub use crate::model::pick::pick;
use crate::model::{Contact, ContactId, ContactRef, EventStats, Page, PageRequest, ProjectId};
use crate::parts::{cores, in_parts};
use crate::project::events::stats_by_contact;
use crate::project::table::{ContactTable, Row};
use crate::project::table_columns::{ColumnView, Needs};
use crate::store::Store;

/// A compiled filter with what it needs to evaluate stored contacts. A clone shares
/// the filter and the event statistics and has scratch slots of its own, so that
/// threads can count parts of the contacts each with their own clone.
#[derive(Clone)]
pub struct Matcher {
    compiled: Arc<Compiled>,
    events: Arc<Vec<HashMap<ContactId, EventStats>>>,
    slots: Vec<Option<Value>>,
}

struct Light<'a, 'b> {
    c: &'b ContactRef<'a>,
    slots: &'b [Option<Value>],
    events: &'b [HashMap<ContactId, EventStats>],
}

impl Subject for Light<'_, '_> {
    fn email(&self) -> &str {
        self.c.email
    }
    fn subscribed(&self) -> bool {
        self.c.subscribed
    }
    fn created_at(&self) -> i64 {
        self.c.created_at
    }
    fn updated_at(&self) -> i64 {
        self.c.updated_at
    }
    fn data(&self, slot: usize) -> Option<&Value> {
        self.slots[slot].as_ref()
    }
    fn event(&self, slot: usize) -> Option<EventStats> {
        self.events[slot].get(&self.c.id).copied()
    }
}

impl Matcher {
    /// Loads the event statistics the filter asks about (one scan per event name).
    pub fn load(store: &dyn Store, p: ProjectId, compiled: Compiled) -> Result<Self> {
        let events = compiled
            .event_names()
            .iter()
            .map(|n| stats_by_contact(store, p, n))
            .collect::<Result<Vec<_>>>()?;
        let slots = vec![None; compiled.data_keys().len()];
        Ok(Matcher {
            compiled: Arc::new(compiled),
            events: Arc::new(events),
            slots,
        })
    }

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    pub fn matches(&mut self, c: &ContactRef<'_>, now: i64) -> bool {
        pick(c.data, self.compiled.data_keys(), &mut self.slots);
        let subject = Light {
            c,
            slots: &self.slots,
            events: &self.events,
        };
        self.compiled.matches(&subject, now)
    }
}

/// Below this many contacts a count stays on the calling thread.
const PARALLEL_FROM: usize = 50_000;

/// Counts the contacts each matcher accepts, in one pass over the stored contacts
/// (the rows of the project's in-memory table). Large tables are split over the
/// machine's cores, each part counted with its own clones of the matchers.
pub fn count(rows: &[Row], matchers: &mut [Matcher], now: i64) -> Result<Vec<u64>> {
    count_rows(rows, matchers, now, cores())
}

/// Counts the contacts of `table` each matcher accepts: over the table's columns
/// (`table_columns`) when the filters test no email, else over its rows (`count`).
pub fn count_table(table: &ContactTable, matchers: &mut [Matcher], now: i64) -> Result<Vec<u64>> {
    if !matchers.is_empty() && matchers.iter().all(|m| !m.compiled.tests_email()) {
        let mut keys: Vec<String> = Vec::new();
        for m in matchers.iter() {
            for k in m.compiled.data_keys() {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        let maps: Vec<Vec<usize>> = matchers
            .iter()
            .map(|m| {
                let data_keys = m.compiled.data_keys();
                data_keys
                    .iter()
                    .map(|k| keys.iter().position(|x| x == k).unwrap_or(0))
                    .collect()
            })
            .collect();
        let needs = Needs {
            ids: matchers
                .iter()
                .any(|m| !m.compiled.event_names().is_empty()),
            times: matchers.iter().any(|m| m.compiled.tests_dates()),
        };
        let counted = table.with_columns(&keys, needs, |view| {
            count_columns(view, matchers, &maps, now)
        })?;
        if let Some(counts) = counted {
            return counts;
        }
    }
    count(&table.rows(), matchers, now)
}

/// A contact as the columns give it: row `slot`, and the matcher's map from its `data`
/// slots to the view's `data` columns.
struct Columned<'b> {
    view: &'b ColumnView,
    slot: usize,
    map: &'b [usize],
    events: &'b [HashMap<ContactId, EventStats>],
}

impl Subject for Columned<'_> {
    fn email(&self) -> &str {
        // Never asked: a filter that tests the email is counted over the rows.
        ""
    }
    fn subscribed(&self) -> bool {
        self.view.subscribed[self.slot]
    }
    fn created_at(&self) -> i64 {
        self.view.created_at[self.slot]
    }
    fn updated_at(&self) -> i64 {
        self.view.updated_at[self.slot]
    }
    fn data(&self, slot: usize) -> Option<&Value> {
        self.view.data[self.map[slot]].value(self.slot)
    }
    fn event(&self, slot: usize) -> Option<EventStats> {
        self.events[slot].get(&self.view.ids[self.slot]).copied()
    }
}

fn count_columns(
    view: &ColumnView,
    matchers: &[Matcher],
    maps: &[Vec<usize>],
    now: i64,
) -> Result<Vec<u64>> {
    let part = |slots: Range<usize>| {
        let mut counts = vec![0u64; matchers.len()];
        for slot in slots {
            for ((m, map), n) in matchers.iter().zip(maps).zip(counts.iter_mut()) {
                let subject = Columned {
                    view,
                    slot,
                    map,
                    events: &m.events,
                };
                if m.compiled.matches(&subject, now) {
                    *n += 1;
                }
            }
        }
        counts
    };
    let parts = in_parts(view.len(), cores(), PARALLEL_FROM, "a count thread", |r| {
        Ok(part(r))
    })?;
    Ok(sum(parts, matchers.len()))
}

/// The counts of each part, added up matcher by matcher.
fn sum(parts: Vec<Vec<u64>>, matchers: usize) -> Vec<u64> {
    let mut counts = vec![0u64; matchers];
    for p in parts {
        for (total, n) in counts.iter_mut().zip(p) {
            *total += n;
        }
    }
    counts
}

fn count_rows(
    rows: &[Row],
    matchers: &mut [Matcher],
    now: i64,
    threads: usize,
) -> Result<Vec<u64>> {
    if matchers.is_empty() {
        return Ok(Vec::new());
    }
    // Each part evaluates with its own clones of the matchers (their scratch slots).
    let parts = in_parts(rows.len(), threads, PARALLEL_FROM, "a count thread", |r| {
        count_part(&rows[r], &mut matchers.to_vec(), now)
    })?;
    Ok(sum(parts, matchers.len()))
}

fn count_part(rows: &[Row], matchers: &mut [Matcher], now: i64) -> Result<Vec<u64>> {
    let mut counts = vec![0u64; matchers.len()];
    if matchers.is_empty() {
        return Ok(counts);
    }
    for row in rows {
        let c = ContactRef::decode(row)?;
        for (m, n) in matchers.iter_mut().zip(counts.iter_mut()) {
            if m.matches(&c, now) {
                *n += 1;
            }
        }
    }
    Ok(counts)
}

/// Calls `f` with the id and email of every contact, and whether each of the two
/// matchers accepts it. Used to diff a segment's membership when its filter changes.
pub fn each_pair(
    store: &dyn Store,
    p: ProjectId,
    before: &mut Matcher,
    after: &mut Matcher,
    now: i64,
    mut f: impl FnMut(ContactId, &str, bool, bool) -> Result<()>,
) -> Result<()> {
    for v in crate::contact::queries::stored(store, p, None, false) {
        let v = v?;
        let c = ContactRef::decode(&v)?;
        let (was, is) = (before.matches(&c, now), after.matches(&c, now));
        f(c.id, c.email, was, is)?;
    }
    Ok(())
}

/// The matching contacts, newest first, paged like `GET /contacts`; `total` counts all
/// matches.
pub fn page(
    store: &dyn Store,
    table: &ContactTable,
    p: ProjectId,
    m: &mut Matcher,
    page: &PageRequest,
    now: i64,
) -> Result<Page<Contact>> {
    let mut out = items(store, p, m, page, now)?;
    out.total = count_table(table, std::slice::from_mut(m), now)?[0];
    Ok(out)
}

/// `page` without the total (0), which is a pass over every contact: an export reads
/// every page and needs none.
pub fn items(
    store: &dyn Store,
    p: ProjectId,
    m: &mut Matcher,
    page: &PageRequest,
    now: i64,
) -> Result<Page<Contact>> {
    let after = crate::contact::queries::page_start(p, page)?;
    let mut items = Vec::with_capacity(page.limit() + 1);
    for v in crate::contact::queries::stored(store, p, after.as_deref(), true) {
        let v = v?;
        if m.matches(&ContactRef::decode(&v)?, now) {
            items.push(Contact::decode(&v)?);
            if items.len() > page.limit() {
                break;
            }
        }
    }
    Ok(Page::of(items, page, 0, |c| c.id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pick_takes_only_the_named_keys() {
        let data =
            r#"{"a": {"deep": [1, 2, {"x": "y"}]}, "plan": "pro", "n\u0041me": 3, "z": null}"#;
        let keys = vec!["plan".to_owned(), "nAme".to_owned(), "missing".to_owned()];
        let mut out = vec![Some(json!(0)); 3];
        pick(data, &keys, &mut out);
        assert_eq!(out, [Some(json!("pro")), Some(json!(3)), None]);
        pick("{}", &keys, &mut out);
        assert_eq!(out, [None, None, None]);
    }

    use crate::model::{DataMap, EmailAddress, Timestamp};
    use crate::segment::filter::Group;

    fn contact(i: usize, data: Value) -> Contact {
        Contact {
            id: ContactId::new(),
            email: EmailAddress::parse(&format!("c{i}@example.com")).unwrap(),
            subscribed: i.is_multiple_of(2),
            data: data.as_object().cloned().unwrap_or_else(DataMap::new),
            created_at: Timestamp::from(1_000 + i as i64),
            updated_at: Timestamp::from(2_000),
        }
    }

    fn matcher(filter: &Value) -> Matcher {
        let compiled = Compiled::new(&Group::parse(filter, "filters").unwrap());
        Matcher {
            slots: vec![None; compiled.data_keys().len()],
            compiled: Arc::new(compiled),
            events: Arc::new(Vec::new()),
        }
    }

    fn data_is(key: &str, value: Value) -> Value {
        json!({"operator": "AND", "conditions": [
            {"field": format!("data.{key}"), "operator": "equals", "value": value}]})
    }

    /// Each filter counted over the table (its columns when it can) and, for the
    /// truth, row by row.
    fn agree(table: &ContactTable, filters: &[Value], what: &str) {
        let mut ms: Vec<Matcher> = filters.iter().map(matcher).collect();
        let over_table = count_table(table, &mut ms, 0).unwrap();
        let over_rows = count_rows(&table.rows(), &mut ms, 0, 1).unwrap();
        assert_eq!(over_table, over_rows, "{what}");
    }

    #[test]
    fn a_count_over_the_columns_sees_every_write_since_they_were_built() {
        let table = ContactTable::default();
        let mut people: Vec<Contact> = (0..300)
            .map(|i| {
                let plan = ["pro", "free", "team"][i % 3];
                contact(i, json!({"plan": plan, "n": i}))
            })
            .collect();
        for c in &people {
            table.put(c, &c.encode().unwrap());
        }
        let pro = data_is("plan", json!("pro"));
        let mut m = [matcher(&pro)];
        assert_eq!(count_table(&table, &mut m, 0).unwrap(), [100]);
        assert!(
            table
                .with_columns(&["plan".to_owned()], Needs::default(), |_| ())
                .unwrap()
                .is_some(),
            "the count built the plan's column"
        );
        // Rewrites, removals from the middle and new contacts, after the columns.
        for i in (1..300).step_by(3) {
            people[i].data.insert("plan".into(), json!("pro"));
            table.put(&people[i], &people[i].encode().unwrap());
        }
        for i in (0..300).step_by(7) {
            table.remove(&people[i]);
        }
        for i in 300..340 {
            let c = contact(i, json!({"plan": "pro"}));
            table.put(&c, &c.encode().unwrap());
        }
        let subscribed_pro = json!({"operator": "AND", "conditions": [
            {"field": "data.plan", "operator": "equals", "value": "pro"},
            {"field": "subscribed", "operator": "equals", "value": true}]});
        agree(&table, &[pro.clone(), subscribed_pro], "after the writes");
        let kept = (0..300).filter(|i| i % 7 != 0);
        let want = kept.filter(|i| i % 3 != 2).count() as u64 + 40;
        assert_eq!(count_table(&table, &mut m, 0).unwrap(), [want]);
    }

    #[test]
    fn counts_over_many_keys_and_keys_of_many_values_agree_with_the_rows() {
        let table = ContactTable::default();
        for i in 0..5_000usize {
            let mut data = serde_json::Map::new();
            for k in 0..20 {
                if (i + k) % 3 != 0 {
                    data.insert(format!("k{k}"), json!((i * k) % 4));
                }
            }
            // `id` has a value per contact: too many for a column.
            data.insert("id".into(), json!(i));
            if i.is_multiple_of(5) {
                let city = ["Oslo", "Lima"][i % 2];
                data.insert("addr".into(), json!({ "city": city }));
            }
            let c = contact(i, Value::Object(data));
            table.put(&c, &c.encode().unwrap());
        }
        // Twenty keys, more than the table keeps columns of, then a nested path, a key
        // of a value per contact, and a date: each alone and two at once.
        for k in 0..20 {
            let one = data_is(&format!("k{k}"), json!(k % 4));
            let two = json!({"operator": "OR", "conditions": [
                {"field": format!("data.k{}", (k + 7) % 20), "operator": "equals", "value": 1},
                {"field": "subscribed", "operator": "equals", "value": true}]});
            agree(&table, &[one, two], &format!("key {k}"));
        }
        let city = data_is("addr.city", json!("Oslo"));
        let id = json!({"operator": "AND", "conditions": [
            {"field": "data.id", "operator": "greaterThan", "value": 4_000}]});
        agree(
            &table,
            &[city, id],
            "a nested path and a key of a value per contact",
        );
        assert!(
            table
                .with_columns(&["id".to_owned()], Needs::default(), |_| ())
                .unwrap()
                .is_none(),
            "a key of a value per contact has no column"
        );
    }
}
