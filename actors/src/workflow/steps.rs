//! A workflow's steps from and to JSON (API.md section 10), and the graph check: every
//! reference names a step, no cycle, every step reachable from the first. Errors name
//! the step in `errors[].field` (`steps.<id>.<part>`).

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use crate::error::{FieldCode, FieldError};
use crate::model::workflow::DelayUnit;
use crate::model::{Step, StepKind, TemplateId};
use crate::segment::Condition;
use crate::store::keys;

pub const MAX_STEPS: usize = 100;
/// A workflow's steps as JSON, at most: each step runs with its workflow loaded.
const MAX_WORKFLOW_BYTES: usize = 256 * 1024;
const MAX_ID: usize = 64;
const MAX_EVENT_NAME: usize = 200;
/// Longest DELAY or wait: ten years.
pub const MAX_WAIT_SECONDS: u64 = 10 * 366 * 86_400;
const MAX_URL: usize = 2_048;
const MAX_JSON: usize = 65_536;
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const TYPES: [&str; 7] = [
    "SEND_EMAIL",
    "DELAY",
    "WAIT_FOR_EVENT",
    "CONDITION",
    "UPDATE_CONTACT",
    "WEBHOOK",
    "EXIT",
];
/// Headers a WEBHOOK step may not set: the request's framing is ours.
const RESERVED_HEADERS: [&str; 5] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "content-type",
];

struct Errors(Vec<FieldError>);

impl Errors {
    fn add(&mut self, field: String, code: FieldCode, message: impl Into<String>) {
        self.0.push(FieldError::new(field, code, message));
    }
}

fn json_size(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// Parses and checks the steps of a workflow.
pub fn parse(v: &Value) -> Result<Vec<Step>, Vec<FieldError>> {
    let mut errors = Errors(Vec::new());
    let Some(items) = v.as_array() else {
        return Err(vec![FieldError::new(
            "steps",
            FieldCode::InvalidType,
            "Expected an array of steps",
        )]);
    };
    if items.is_empty() || items.len() > MAX_STEPS {
        let code = if items.is_empty() {
            FieldCode::TooSmall
        } else {
            FieldCode::TooBig
        };
        return Err(vec![FieldError::new(
            "steps",
            code,
            format!("A workflow has 1 to {MAX_STEPS} steps"),
        )]);
    }
    let mut steps = Vec::with_capacity(items.len());
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(step) = parse_step(i, item, &mut errors) {
            if !seen.insert(step.id.clone()) {
                errors.add(
                    format!("steps.{}.id", step.id),
                    FieldCode::Custom,
                    "Two steps have this id",
                );
            }
            steps.push(step);
        }
    }
    if errors.0.is_empty() {
        check_graph(&steps, &mut errors);
    }
    let size: usize = steps.iter().map(|s| to_json(s).to_string().len()).sum();
    if errors.0.is_empty() && size > MAX_WORKFLOW_BYTES {
        errors.add(
            "steps".into(),
            FieldCode::TooBig,
            format!("The steps take {size} bytes of JSON; the most is {MAX_WORKFLOW_BYTES}"),
        );
    }
    match errors.0.is_empty() {
        true => Ok(steps),
        false => Err(errors.0),
    }
}

fn parse_step(i: usize, item: &Value, errors: &mut Errors) -> Option<Step> {
    let Some(obj) = item.as_object() else {
        errors.add(
            format!("steps[{i}]"),
            FieldCode::InvalidType,
            "Expected an object",
        );
        return None;
    };
    let id = match obj.get("id") {
        // Plain ids only: they are named in `errors[].field` (`steps.<id>.<part>`).
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= MAX_ID
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            s.clone()
        }
        Some(Value::String(_)) => {
            errors.add(
                format!("steps[{i}].id"),
                FieldCode::InvalidString,
                format!("A step id is 1 to {MAX_ID} letters, digits, '_' or '-'"),
            );
            return None;
        }
        _ => {
            errors.add(
                format!("steps[{i}].id"),
                FieldCode::InvalidType,
                "Required: a string",
            );
            return None;
        }
    };
    let at = |part: &str| format!("steps.{id}.{part}");
    let kind = match obj.get("type").and_then(Value::as_str) {
        Some(t) if TYPES.contains(&t) => t,
        _ => {
            errors.add(
                at("type"),
                FieldCode::InvalidEnumValue,
                format!("Expected one of {}", TYPES.join(", ")),
            );
            return None;
        }
    };
    let empty = Map::new();
    let config = match obj.get("config") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(c)) => c,
        Some(_) => {
            errors.add(at("config"), FieldCode::InvalidType, "Expected an object");
            return None;
        }
    };
    let link = |name: &str, errors: &mut Errors| -> Option<String> {
        match obj.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                errors.add(
                    at(name),
                    FieldCode::InvalidType,
                    "Expected a step id or null",
                );
                None
            }
        }
    };
    let mut step = Step {
        id: id.clone(),
        kind: StepKind::Exit,
        next: link("next", errors),
        yes: None,
        no: None,
        timeout_next: None,
    };
    let before = errors.0.len();
    step.kind = match kind {
        "SEND_EMAIL" => {
            let template_id = match config.get("templateId").and_then(Value::as_str) {
                // An id that cannot exist names no template: the 404 comes with the
                // existence check (clarification 10).
                Some(s) => s
                    .parse::<TemplateId>()
                    .unwrap_or_else(|_| keys::id_after(&[0; 16], b"").unwrap_or_default()),
                None => {
                    errors.add(
                        at("config.templateId"),
                        FieldCode::InvalidType,
                        "Required: a template id",
                    );
                    TemplateId::default()
                }
            };
            StepKind::SendEmail { template_id }
        }
        "DELAY" => {
            let amount = count(
                config,
                "amount",
                &at("config.amount"),
                MAX_WAIT_SECONDS,
                errors,
            );
            let unit = match config
                .get("unit")
                .and_then(Value::as_str)
                .and_then(DelayUnit::parse)
            {
                Some(u) => u,
                None => {
                    errors.add(
                        at("config.unit"),
                        FieldCode::InvalidEnumValue,
                        "Expected 'seconds' | 'minutes' | 'hours' | 'days'",
                    );
                    DelayUnit::Seconds
                }
            };
            if amount.saturating_mul(unit.millis() as u64 / 1000) > MAX_WAIT_SECONDS {
                errors.add(
                    at("config.amount"),
                    FieldCode::TooBig,
                    "A delay is at most ten years",
                );
            }
            StepKind::Delay { amount, unit }
        }
        "WAIT_FOR_EVENT" => {
            let event_name = match config.get("eventName").and_then(Value::as_str) {
                // The name is part of a key of the waiting index, as on /v1/track.
                Some(s) if s.chars().any(char::is_control) => {
                    errors.add(
                        at("config.eventName"),
                        FieldCode::InvalidString,
                        "The event name cannot hold control characters",
                    );
                    String::new()
                }
                Some(s) if !s.trim().is_empty() && s.len() <= MAX_EVENT_NAME => s.trim().to_owned(),
                _ => {
                    errors.add(
                        at("config.eventName"),
                        FieldCode::InvalidType,
                        format!("Required: an event name of 1 to {MAX_EVENT_NAME} characters"),
                    );
                    String::new()
                }
            };
            let timeout_seconds = count(
                config,
                "timeoutSeconds",
                &at("config.timeoutSeconds"),
                MAX_WAIT_SECONDS,
                errors,
            );
            if !obj.contains_key("timeoutNext") {
                errors.add(
                    at("timeoutNext"),
                    FieldCode::InvalidType,
                    "Required: the step after the timeout, or null to end there",
                );
            }
            step.timeout_next = link("timeoutNext", errors);
            StepKind::WaitForEvent {
                event_name,
                timeout_seconds,
            }
        }
        "CONDITION" => {
            if step.next.is_some() {
                errors.add(
                    at("next"),
                    FieldCode::Custom,
                    "A CONDITION goes on by `yes` and `no`, not `next`",
                );
            }
            step.yes = link("yes", errors);
            step.no = link("no", errors);
            let v = Value::Object(config.clone());
            // Kept in its canonical form: what the condition says, nothing else sent.
            let condition = match Condition::parse(&v, &at("config")) {
                Ok(c) => c.to_json().to_string(),
                Err(mut e) => {
                    errors.0.append(&mut e);
                    String::new()
                }
            };
            StepKind::Condition { condition }
        }
        "UPDATE_CONTACT" => {
            let data = match config.get("data") {
                None | Some(Value::Null) => None,
                Some(Value::Object(m)) if json_size(&Value::Object(m.clone())) <= MAX_JSON => {
                    Some(Value::Object(m.clone()).to_string())
                }
                Some(Value::Object(_)) => {
                    errors.add(
                        at("config.data"),
                        FieldCode::TooBig,
                        format!("At most {MAX_JSON} bytes of JSON"),
                    );
                    None
                }
                Some(_) => {
                    errors.add(
                        at("config.data"),
                        FieldCode::InvalidType,
                        "Expected an object",
                    );
                    None
                }
            };
            let subscribed = match config.get("subscribed") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => {
                    errors.add(
                        at("config.subscribed"),
                        FieldCode::InvalidType,
                        "Expected a boolean",
                    );
                    None
                }
            };
            if data.is_none() && subscribed.is_none() && errors.0.len() == before {
                errors.add(
                    at("config"),
                    FieldCode::Custom,
                    "Give `data`, `subscribed` or both",
                );
            }
            StepKind::UpdateContact { data, subscribed }
        }
        "WEBHOOK" => webhook(config, &at, errors),
        _ => {
            if step.next.is_some() {
                errors.add(
                    at("next"),
                    FieldCode::Custom,
                    "EXIT ends the execution; it has no `next`",
                );
            }
            StepKind::Exit
        }
    };
    Some(step)
}

fn webhook(
    config: &Map<String, Value>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Errors,
) -> StepKind {
    let url = match config.get("url").and_then(Value::as_str) {
        Some(u)
            if (u.starts_with("http://") || u.starts_with("https://"))
                && u.len() <= MAX_URL
                && u.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            if let Err(why) = super::webhook::check_url(u) {
                errors.add(
                    at("config.url"),
                    FieldCode::InvalidString,
                    format!("The URL cannot be called: {why}"),
                );
            }
            u.to_owned()
        }
        _ => {
            errors.add(
                at("config.url"),
                FieldCode::InvalidString,
                format!("Required: an http:// or https:// URL of at most {MAX_URL} characters"),
            );
            String::new()
        }
    };
    let method = match config.get("method") {
        None | Some(Value::Null) => "POST".to_owned(),
        Some(Value::String(m)) if METHODS.contains(&m.to_ascii_uppercase().as_str()) => {
            m.to_ascii_uppercase()
        }
        Some(_) => {
            errors.add(
                at("config.method"),
                FieldCode::InvalidEnumValue,
                format!("Expected one of {}", METHODS.join(", ")),
            );
            String::new()
        }
    };
    let mut headers = Vec::new();
    match config.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) if h.len() <= 32 => {
            for (name, value) in h {
                let ok_name = !name.is_empty()
                    && name.len() <= 128
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                let reserved = RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str());
                match value.as_str() {
                    Some(v)
                        if ok_name
                            && !reserved
                            && v.len() <= 1024
                            && !v.bytes().any(|b| b.is_ascii_control()) =>
                    {
                        headers.push((name.clone(), v.to_owned()));
                    }
                    _ => errors.add(
                        at(&format!("config.headers.{name}")),
                        FieldCode::Custom,
                        "A header is a token name (not Host, Content-Length, Content-Type, \
                         Connection or Transfer-Encoding) with a one-line string value",
                    ),
                }
            }
        }
        Some(_) => errors.add(
            at("config.headers"),
            FieldCode::InvalidType,
            "Expected an object of at most 32 strings",
        ),
    }
    let body = match config.get("body") {
        None | Some(Value::Null) => None,
        Some(v) if json_size(v) <= MAX_JSON => Some(v.to_string()),
        Some(_) => {
            errors.add(
                at("config.body"),
                FieldCode::TooBig,
                format!("At most {MAX_JSON} bytes of JSON"),
            );
            None
        }
    };
    StepKind::Webhook {
        url,
        method,
        headers,
        body,
    }
}

/// A whole number from 1 to `max`.
fn count(
    config: &Map<String, Value>,
    name: &str,
    field: &str,
    max: u64,
    errors: &mut Errors,
) -> u64 {
    match config.get(name).and_then(Value::as_u64) {
        Some(n) if (1..=max).contains(&n) => n,
        _ => {
            errors.add(
                field.to_owned(),
                FieldCode::InvalidType,
                format!("Required: a whole number from 1 to {max}"),
            );
            1
        }
    }
}

/// The steps a step can go to.
pub fn links(s: &Step) -> impl Iterator<Item = (&'static str, &String)> {
    [
        ("next", s.next.as_ref()),
        ("yes", s.yes.as_ref()),
        ("no", s.no.as_ref()),
        ("timeoutNext", s.timeout_next.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, l)| l.map(|l| (n, l)))
}

fn check_graph(steps: &[Step], errors: &mut Errors) {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    for s in steps {
        for (name, to) in links(s) {
            if !index.contains_key(to.as_str()) {
                errors.add(
                    format!("steps.{}.{name}", s.id),
                    FieldCode::Custom,
                    format!("No step has the id {to:?}"),
                );
            }
        }
    }
    if !errors.0.is_empty() {
        return;
    }
    // Depth-first from every step: a grey step met again closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        White,
        Grey,
        Black,
    }
    let mut marks = vec![Mark::White; steps.len()];
    fn visit(
        i: usize,
        steps: &[Step],
        index: &HashMap<&str, usize>,
        marks: &mut [Mark],
    ) -> Option<usize> {
        marks[i] = Mark::Grey;
        for (_, to) in links(&steps[i]) {
            let j = index[to.as_str()];
            match marks[j] {
                Mark::Grey => return Some(i),
                Mark::White => {
                    if let Some(c) = visit(j, steps, index, marks) {
                        return Some(c);
                    }
                }
                Mark::Black => {}
            }
        }
        marks[i] = Mark::Black;
        None
    }
    for i in 0..steps.len() {
        if marks[i] == Mark::White {
            if let Some(at) = visit(i, steps, &index, &mut marks) {
                errors.add(
                    format!("steps.{}", steps[at].id),
                    FieldCode::Custom,
                    "The steps form a cycle through this step; a workflow must always move forward",
                );
                return;
            }
        }
    }
    let mut reached = vec![false; steps.len()];
    let mut todo = vec![0usize];
    while let Some(i) = todo.pop() {
        if std::mem::replace(&mut reached[i], true) {
            continue;
        }
        todo.extend(links(&steps[i]).map(|(_, to)| index[to.as_str()]));
    }
    for (i, s) in steps.iter().enumerate() {
        if !reached[i] {
            errors.add(
                format!("steps.{}", s.id),
                FieldCode::Custom,
                "No path from the first step reaches this step",
            );
        }
    }
}

/// A step as the API shows it.
pub fn to_json(s: &Step) -> Value {
    let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    let config = match &s.kind {
        StepKind::SendEmail { template_id } => json!({"templateId": template_id.to_string()}),
        StepKind::Delay { amount, unit } => json!({"amount": amount, "unit": unit.as_str()}),
        StepKind::WaitForEvent {
            event_name,
            timeout_seconds,
        } => json!({"eventName": event_name, "timeoutSeconds": timeout_seconds}),
        StepKind::Condition { condition } => parse(condition),
        StepKind::UpdateContact { data, subscribed } => {
            let mut c = Map::new();
            if let Some(d) = data {
                c.insert("data".into(), parse(d));
            }
            if let Some(s) = subscribed {
                c.insert("subscribed".into(), Value::Bool(*s));
            }
            Value::Object(c)
        }
        StepKind::Webhook {
            url,
            method,
            headers,
            body,
        } => {
            let h: Map<String, Value> = headers
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            json!({"url": url, "method": method, "headers": h,
                   "body": body.as_deref().map_or(Value::Null, parse)})
        }
        StepKind::Exit => json!({}),
    };
    let mut v = json!({"id": s.id, "type": s.kind.type_name(), "config": config});
    let obj = v.as_object_mut().expect("an object");
    match &s.kind {
        StepKind::Condition { .. } => {
            obj.insert("yes".into(), json!(s.yes));
            obj.insert("no".into(), json!(s.no));
        }
        StepKind::WaitForEvent { .. } => {
            obj.insert("next".into(), json!(s.next));
            obj.insert("timeoutNext".into(), json!(s.timeout_next));
        }
        _ => {
            obj.insert("next".into(), json!(s.next));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(v: Value) -> Vec<String> {
        parse(&v)
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_valid_graph_parses_and_shows_as_it_came() {
        let v = json!([
            {"id": "wait", "type": "DELAY", "config": {"amount": 3, "unit": "days"}, "next": "check"},
            {"id": "check", "type": "CONDITION", "config": {"field": "data.plan", "operator": "equals", "value": "pro"}, "yes": "bye", "no": null},
            {"id": "bye", "type": "EXIT", "config": {}}
        ]);
        let steps = parse(&v).unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(
            to_json(&steps[0])["config"],
            json!({"amount": 3, "unit": "days"})
        );
        assert_eq!(to_json(&steps[1])["yes"], "bye");
    }

    #[test]
    fn cycles_unknown_ids_unreachable_steps_and_a_missing_timeout_branch_name_the_step() {
        let cycle = json!([
            {"id": "a", "type": "DELAY", "config": {"amount": 1, "unit": "seconds"}, "next": "b"},
            {"id": "b", "type": "DELAY", "config": {"amount": 1, "unit": "seconds"}, "next": "a"}
        ]);
        assert!(fields(cycle).iter().all(|f| f.starts_with("steps.")));
        let unknown = json!([{"id": "a", "type": "EXIT", "next": "zz"}]);
        assert!(fields(unknown).contains(&"steps.a.next".to_owned()));
        let unreachable = json!([
            {"id": "a", "type": "EXIT"},
            {"id": "b", "type": "EXIT"}
        ]);
        assert_eq!(fields(unreachable), ["steps.b"]);
        let no_timeout = json!([{"id": "w", "type": "WAIT_FOR_EVENT", "config": {"eventName": "x", "timeoutSeconds": 5}, "next": null}]);
        assert_eq!(fields(no_timeout), ["steps.w.timeoutNext"]);
        let bad_type = json!([{"id": "t", "type": "SLEEP"}]);
        assert_eq!(fields(bad_type), ["steps.t.type"]);
        assert_eq!(fields(json!([])), ["steps"]);
    }
}
