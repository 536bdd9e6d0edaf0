//! A workflow's steps as JSON Schema, next to their parser (`steps.rs`): the shape of
//! each step type. The graph rules (every link names a step, no cycle, every step
//! reachable from the first) are beyond JSON Schema: `steps::parse` checks them and
//! answers 422 naming the step.

use serde_json::{json, Value};

use super::steps::{MAX_STEPS, MAX_WAIT_SECONDS};

crate::json_part!(
    /// The steps as a request carries them; `steps::parse` checks them field by field.
    StepsDocument,
    "WorkflowSteps",
    steps()
);

fn step(kind: &str, config: Value, links: &[&str]) -> Value {
    let link = json!({"type": ["string", "null"], "pattern": "^[A-Za-z0-9_-]{1,64}$"});
    let mut properties = json!({
        "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "type": {"const": kind},
        "config": config,
    });
    for l in links {
        properties[*l] = link.clone();
    }
    json!({"type": "object", "required": ["id", "type"], "properties": properties})
}

/// A DELAY's amount and unit: a whole number from 1, at most ten years in its unit.
fn delay() -> Value {
    let units: Vec<Value> = [
        ("seconds", 1),
        ("minutes", 60),
        ("hours", 3_600),
        ("days", 86_400),
    ]
    .iter()
    .map(|(unit, secs)| {
        json!({"type": "object", "required": ["amount", "unit"], "properties": {
            "unit": {"const": unit},
            "amount": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECONDS / secs},
        }})
    })
    .collect();
    json!({"anyOf": units})
}

/// WAIT_FOR_EVENT must say where a timeout goes (`timeoutNext`, null to end there).
fn wait_for_event(config: Value) -> Value {
    let mut s = step("WAIT_FOR_EVENT", config, &["next", "timeoutNext"]);
    s["required"] = json!(["id", "type", "timeoutNext"]);
    s
}

fn steps() -> Value {
    let seconds = json!({"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECONDS});
    let object = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
    let step_schema = json!({
        "description": "A step: `id`, `type`, `config`, and the links to the next steps (CONDITION: `yes`/`no`; WAIT_FOR_EVENT: `next` and `timeoutNext`; EXIT: none).",
        "anyOf": [
            step("SEND_EMAIL", object(json!({"templateId": {"type": "string"}}), &["templateId"]), &["next"]),
            step("DELAY", delay(), &["next"]),
            wait_for_event(object(json!({
                // Control characters are C0, DEL and C1, as `char::is_control` has them.
                "eventName": {"type": "string", "maxLength": 200,
                              "pattern": r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"},
                "timeoutSeconds": seconds,
            }), &["eventName", "timeoutSeconds"])),
            step("CONDITION", json!({"description": "One condition of the segment filter language (FilterGroup's conditions)."}), &["yes", "no"]),
            step("UPDATE_CONTACT", json!({"type": "object", "properties": {
                "data": {"type": "object"},
                "subscribed": {"type": "boolean"},
            }, "minProperties": 1}), &["next"]),
            step("WEBHOOK", object(json!({
                "url": {"type": "string", "pattern": "^https?://[!-~]+$", "maxLength": 2048},
                // Any case; POST when null or left out.
                "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE",
                                    "get", "post", "put", "patch", "delete", null]},
                "headers": {"type": ["object", "null"], "maxProperties": 32,
                            "propertyNames": {"pattern": "^[A-Za-z0-9_-]{1,128}$"},
                            "additionalProperties": {"type": "string", "maxLength": 1024,
                                                     "pattern": "^[^\\x00-\\x1f\\x7f]*$"}},
                "body": {},
            }), &["url"]), &["next"]),
            step("EXIT", json!({"type": ["object", "null"]}), &[]),
        ],
    });
    json!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_STEPS,
        "description": "The steps; the first runs first.",
        "items": step_schema,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_says_what_the_parser_needs() {
        let back = StepsDocument::json_schema();
        assert_eq!(back["maxItems"], json!(MAX_STEPS));
    }
}
