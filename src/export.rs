//! `mailroom project export`: one project as JSON lines, each object with a `kind`
//! (project, contact, template, segment, campaign, workflow, event) and otherwise the
//! shape the API gives it, so a tenant can take their data elsewhere. API keys and
//! sending state (the outbox, executions, statistics) are not part of it.

use std::io::Write;

use mailroom_actors::engine::offline;
use mailroom_actors::engine::projects::Projects;
use mailroom_actors::engine::segments::{Segment, SegmentKind};
use mailroom_actors::model::ProjectId;
use mailroom_actors::store::backup::{self, Tally};
use mailroom_actors::store::Store;
use serde::Serialize;
use serde_json::Value;

use crate::api::admin::project_json;
use crate::api::campaigns::CampaignView;
use crate::api::contacts::ContactView;
use crate::api::events::EventView;
use crate::api::segments::SegmentView;
use crate::api::templates::TemplateView;
use crate::api::workflows::WorkflowView;
use crate::failure::Failure;

/// How often `report` hears of the lines so far.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

struct Lines<'a, W: Write> {
    out: &'a mut W,
    tally: Tally,
    report: &'a mut dyn FnMut(Tally),
    last: std::time::Instant,
}

impl<W: Write> Lines<'_, W> {
    fn put(&mut self, kind: &str, view: impl Serialize) -> Result<(), Failure> {
        let mut v = serde_json::to_value(view)
            .map_err(|e| Failure::caused("turning a record into JSON", e))?;
        if let Value::Object(map) = &mut v {
            map.insert("kind".into(), Value::String(kind.into()));
        }
        let mut line = v.to_string();
        line.push('\n');
        self.out
            .write_all(line.as_bytes())
            .map_err(|e| Failure::caused("writing the export", e))?;
        self.tally.records += 1;
        self.tally.bytes += line.len() as u64;
        if self.last.elapsed() >= PROGRESS_EVERY {
            self.last = std::time::Instant::now();
            (self.report)(self.tally);
        }
        Ok(())
    }
}

/// Writes project `p` to `out`. Each record is read whole, but writes that land during
/// the export may or may not be in it (a backup is the point-in-time copy).
pub fn write(
    projects: &Projects,
    store: &dyn Store,
    p: ProjectId,
    out: &mut impl Write,
    report: &mut dyn FnMut(Tally),
) -> Result<Tally, Failure> {
    let e = Failure::engine;
    let project = projects.get(p).map_err(e)?;
    let mut lines = Lines {
        out,
        tally: Tally::default(),
        report,
        last: std::time::Instant::now(),
    };
    lines.put("project", project_json(&project))?;
    for c in offline::each_contact(store, p) {
        lines.put("contact", ContactView::from(&c.map_err(e)?))?;
    }
    for t in offline::each_template(store, p) {
        lines.put("template", TemplateView::from(&t.map_err(e)?))?;
    }
    for s in offline::each_segment(store, p) {
        lines.put("segment", segment(store, p, &s.map_err(e)?)?)?;
    }
    for c in offline::each_campaign(store, p) {
        lines.put("campaign", CampaignView::from(&c.map_err(e)?))?;
    }
    for w in offline::each_workflow(store, p) {
        lines.put("workflow", WorkflowView::from(&w.map_err(e)?))?;
    }
    for ev in offline::each_event(store, p) {
        lines.put("event", EventView::from(&ev.map_err(e)?))?;
    }
    lines
        .out
        .flush()
        .map_err(|e| Failure::caused("writing the export", e))?;
    (lines.report)(lines.tally);
    Ok(lines.tally)
}

/// The API's view without its member count (a count of the moment), and a STATIC
/// segment's members as contact ids: what another system needs to rebuild it.
fn segment(store: &dyn Store, p: ProjectId, s: &Segment) -> Result<Value, Failure> {
    let mut v = serde_json::to_value(SegmentView::new(s, 0))
        .map_err(|e| Failure::caused("turning a segment into JSON", e))?;
    if let Value::Object(map) = &mut v {
        map.remove("memberCount");
        if s.kind == SegmentKind::Static {
            let mut members = Vec::new();
            for id in offline::static_members(store, p, s.id) {
                members.push(Value::String(id.map_err(Failure::engine)?.to_string()));
            }
            map.insert("members".into(), Value::Array(members));
        }
    }
    Ok(v)
}

/// Writes the export to `path` through `<path>.partial`, renamed into place when whole;
/// refuses an existing `path`.
pub fn write_file(
    projects: &Projects,
    store: &dyn Store,
    p: ProjectId,
    path: &std::path::Path,
    report: &mut dyn FnMut(Tally),
) -> Result<Tally, Failure> {
    if path.exists() {
        return Err(Failure::said(format!(
            "{} already exists; an export does not overwrite a file",
            path.display()
        )));
    }
    let partial = backup::partial_path(path);
    let file = backup::create_private(&partial)
        .map_err(|e| Failure::caused(format!("creating {}", partial.display()), e))?;
    let result = (|| {
        let mut out = std::io::BufWriter::new(file);
        let tally = write(projects, store, p, &mut out, report)?;
        let file = out
            .into_inner()
            .map_err(|e| Failure::caused("writing the export", e.into_error()))?;
        file.sync_all()
            .map_err(|e| Failure::caused(format!("syncing {}", partial.display()), e))?;
        backup::publish(&partial, path)
            .map_err(|e| Failure::caused(format!("moving the export to {}", path.display()), e))?;
        backup::sync_parent(path);
        Ok(tally)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}
