//! Workflows: the list with enable and disable, a workflow's steps as a graph (an SVG
//! drawn on the server, and the same edges as a list), and its executions with their
//! history.

use actix_web::{web, HttpResponse};
use mailroom_actors::engine::workflows::{step_json, Step, Workflow, WorkflowPatch};
use mailroom_actors::model::{PageRequest, WorkflowId};
use maud::{html, Markup};
use serde::Deserialize;

use super::auth::{Posted, Signed};
use super::error::PageError;
use super::layout::{self, csrf};
use crate::api::workflows::ExecutionView;
use crate::state::AppState;

const BOX_W: f64 = 260.0;
const BOX_H: f64 = 44.0;
const GAP: f64 = 30.0;

fn workflow_id(raw: &str) -> Result<WorkflowId, PageError> {
    raw.parse().map_err(|_| PageError::NotFound)
}

fn toggle(signed: &Signed, w: &Workflow) -> Markup {
    html! {
        form.inline method="post" action={ "/app/workflows/" (w.id) "/enabled" } {
            (csrf(signed))
            input type="hidden" name="enabled" value=(if w.enabled { "false" } else { "true" });
            button type="submit" class="secondary" aria-label={ (if w.enabled { "Disable " } else { "Enable " }) (w.name) } {
                @if w.enabled { "Disable" } @else { "Enable" }
            }
        }
    }
}

pub async fn list(signed: Signed, state: web::Data<AppState>) -> Result<HttpResponse, PageError> {
    let page = state
        .engine
        .workflows()
        .list(signed.project, PageRequest::first(100))
        .await?;
    let body = html! {
        p.muted { "Workflows are created through the API (" code { "POST /workflows" } "); here they are shown, enabled and disabled." }
        @if page.items.is_empty() { p { "No workflows yet." } } @else {
            table {
                caption.visually-hidden { "Workflows" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Trigger" } th scope="col" { "Steps" } th scope="col" { "Enabled" } th scope="col" { span.visually-hidden { "Change" } } } }
                tbody {
                    @for w in &page.items {
                        tr {
                            td { a href={ "/app/workflows/" (w.id) } { (w.name) } }
                            td { code { (w.trigger_event) } }
                            td { (w.steps.len()) }
                            td.enabled { @if w.enabled { "yes" } @else { "no" } }
                            td { (toggle(&signed, w)) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(&signed, "/app/workflows", "Workflows", body))
}

/// Each edge of the graph: (from, to, label).
fn edges(steps: &[Step]) -> Vec<(usize, usize, &'static str)> {
    let index = |id: &Option<String>| {
        id.as_ref()
            .and_then(|id| steps.iter().position(|s| &s.id == id))
    };
    let mut out = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        for (target, label) in [
            (&s.next, "next"),
            (&s.yes, "yes"),
            (&s.no, "no"),
            (&s.timeout_next, "timeout"),
        ] {
            if let Some(j) = index(target) {
                out.push((i, j, label));
            }
        }
    }
    out
}

fn graph(w: &Workflow) -> Markup {
    let n = w.steps.len();
    let height = (n as f64) * (BOX_H + GAP) + GAP;
    let y = |i: usize| GAP + i as f64 * (BOX_H + GAP);
    let edges = edges(&w.steps);
    let view_box = format!("0 0 {} {height}", BOX_W + 260.0);
    html! {
        figure.chart {
            svg viewBox=(view_box) role="img" aria-labelledby="graph-title" {
                title #graph-title { "The steps of " (w.name) " as a graph" }
                defs {
                    marker #arrow viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse" {
                        path d="M 0 0 L 10 5 L 0 10 z" fill="#57606a" {}
                    }
                }
                @for (i, s) in w.steps.iter().enumerate() {
                    @let j = step_json(s);
                    rect x="10" y=(y(i)) width=(BOX_W) height=(BOX_H) rx="6" fill="#f6f8fa" stroke="#8c959f" {}
                    text x="20" y=(y(i) + 18.0) font-size="13" font-weight="600" { (s.id) }
                    text x="20" y=(y(i) + 35.0) font-size="12" fill="#57606a" { (j["type"].as_str().unwrap_or_default()) }
                }
                @for (k, (from, to, label)) in edges.iter().enumerate() {
                    @let (y1, y2) = (y(*from) + BOX_H / 2.0, y(*to) + BOX_H / 2.0);
                    @let bend = BOX_W + 40.0 + 30.0 * (k % 5) as f64;
                    path d=(format!("M {} {y1} C {bend} {y1}, {bend} {y2}, {} {y2}", BOX_W + 10.0, BOX_W + 12.0))
                        fill="none" stroke="#57606a" stroke-width="1.5" marker-end="url(#arrow)" {}
                    text x=(bend - 10.0) y=((y1 + y2) / 2.0) font-size="11" fill="#0b5cad" { (label) }
                }
            }
        }
        ol.graph {
            @for s in &w.steps {
                @let j = step_json(s);
                li id={ "step-" (s.id) } {
                    strong { (s.id) } " · " (j["type"].as_str().unwrap_or_default())
                    pre { (j["config"]) }
                    @for (target, label) in [(&s.next, "next"), (&s.yes, "yes"), (&s.no, "no"), (&s.timeout_next, "on timeout")] {
                        @if let Some(t) = target { " " (label) " → " a href={ "#step-" (t) } { (t) } }
                    }
                }
            }
        }
    }
}

pub async fn show(
    signed: Signed,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = workflow_id(&id)?;
    let p = signed.project;
    let w = state.engine.workflows().get(p, id)?;
    let executions = state
        .engine
        .workflows()
        .executions(p, id, None, PageRequest::first(50))
        .await?;
    let body = html! {
        p { "Trigger: " code { (w.trigger_event) } " · Enabled: " strong.enabled { @if w.enabled { "yes" } @else { "no" } } " " (toggle(&signed, &w)) }
        h2 { "Steps" }
        (graph(&w))
        h2 { "Executions" }
        p.muted { (executions.total) " in all; the latest 50." }
        @if executions.items.is_empty() { p { "None yet." } }
        @for e in &executions.items {
            @let v = serde_json::to_value(ExecutionView::from(e)).unwrap_or_default();
            details {
                summary { (v["status"].as_str().unwrap_or_default()) " · contact " a href={ "/app/contacts/" (e.contact_id) } { (e.contact_id) } " · started " (v["startedAt"].as_str().unwrap_or_default()) }
                ol {
                    @for h in v["history"].as_array().into_iter().flatten() {
                        li { (h["at"].as_str().unwrap_or_default()) " " strong { (h["stepId"].as_str().unwrap_or_default()) } " " (h["type"].as_str().unwrap_or_default()) ": " (h["status"].as_str().unwrap_or_default())
                            @if let Some(err) = h["error"].as_str() { " (" (err) ")" } }
                    }
                }
            }
        }
    };
    Ok(layout::page(&signed, "/app/workflows", &w.name, body))
}

#[derive(Deserialize)]
pub struct EnabledForm {
    #[serde(default)]
    enabled: String,
}

pub async fn set_enabled(
    Posted(signed, form): Posted<EnabledForm>,
    id: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, PageError> {
    let id = workflow_id(&id)?;
    let patch = WorkflowPatch {
        enabled: Some(form.enabled == "true"),
        ..WorkflowPatch::default()
    };
    state
        .engine
        .workflows()
        .update(signed.project, id, patch)
        .await?;
    Ok(super::see_other(&format!("/app/workflows/{id}")))
}
