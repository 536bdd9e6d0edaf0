//! The filter language of API.md section 8 as JSON Schema, next to its parser
//! (`filter.rs`): what `/openapi.json` says a filter is. Every filter the schema
//! accepts, the parser accepts too; the parser is more lenient (operators in any case,
//! `unit` in the singular, date-only values), and a few of its rules (a period of at most
//! 100 years in any unit) are tighter in the schema than they need to be.

use serde_json::{json, Value};

use super::filter::MAX_IN_VALUES;

crate::json_part!(
    /// A filter group as a request carries it; `Group::parse` checks it field by field
    /// (every problem named by its path).
    FilterDocument,
    "FilterGroup",
    group()
);

/// The longest period: 100 years (of 366 days) in each unit the parser takes.
const MAX_PERIOD: [(&str, &str, u64); 3] = [
    ("minutes", "minute", 100 * 366 * 24 * 60),
    ("hours", "hour", 100 * 366 * 24),
    ("days", "day", 100 * 366),
];

/// `value` and `unit` of a period: at most 100 years, in days when `unit` is left out.
fn period() -> Value {
    let mut by_unit: Vec<Value> = MAX_PERIOD
        .iter()
        .map(|(unit, singular, max)| {
            json!({"required": ["unit"], "properties": {
                "unit": {"enum": [unit, singular]},
                "value": {"type": "number", "minimum": 0, "maximum": max},
            }})
        })
        .collect();
    // No unit (or null): days.
    by_unit.push(json!({"properties": {
        "unit": {"type": "null"},
        "value": {"type": "number", "minimum": 0, "maximum": MAX_PERIOD[2].2},
    }}));
    json!({"anyOf": by_unit})
}

fn condition() -> Value {
    let data = json!({"type": "string", "pattern": r"^data\.[^.]+(\.[^.]+)*$"});
    let event = json!({"type": "string", "pattern": r"^event\..+$"});
    let dates = json!({"type": "string", "enum": ["createdAt", "updatedAt"]});
    let ops = |names: &[&str]| json!({"type": "string", "enum": names});
    let branch = |field: Value, operator: Value, value: Option<Value>| {
        let mut b = json!({
            "type": "object",
            "required": ["field", "operator"],
            "properties": {"field": field, "operator": operator},
        });
        if let Some(v) = value {
            b["required"] = json!(["field", "operator", "value"]);
            b["properties"]["value"] = v;
        }
        b
    };
    // A period's value is a number; `period()` bounds it together with its unit.
    let timed = |field: Value, operator: Value| {
        let mut b = branch(field, operator, Some(json!({"type": "number"})));
        b["allOf"] = json!([period()]);
        b
    };
    let any_but_null = json!({"type": ["string", "number", "boolean", "array", "object"]});
    let list = json!({"type": "array", "maxItems": MAX_IN_VALUES});
    json!({
        "description": "One condition: a field, an operator that applies to it, and a value of the type the operator takes.",
        "not": {"required": ["conditions"]},
        "anyOf": [
            branch(json!({"const": "email"}), ops(&["equals", "notEquals", "contains", "notContains"]), Some(json!({"type": "string"}))),
            branch(json!({"const": "email"}), ops(&["in", "notIn"]), Some(json!({"type": "array", "maxItems": MAX_IN_VALUES, "items": {"type": "string"}}))),
            branch(json!({"type": "string", "enum": ["email", "subscribed", "createdAt", "updatedAt"]}), ops(&["exists", "notExists"]), None),
            branch(json!({"const": "subscribed"}), ops(&["equals", "notEquals"]), Some(json!({"type": "boolean"}))),
            branch(dates.clone(), ops(&["equals", "notEquals", "greaterThan", "lessThan", "greaterThanOrEqual", "lessThanOrEqual"]), Some(json!({"type": "string", "format": "date-time"}))),
            timed(dates, ops(&["within", "olderThan"])),
            branch(data.clone(), ops(&["exists", "notExists"]), None),
            branch(data.clone(), ops(&["equals", "notEquals"]), Some(any_but_null)),
            branch(data.clone(), ops(&["contains", "notContains"]), Some(json!({"type": ["string", "number", "boolean"]}))),
            branch(data.clone(), ops(&["greaterThan", "lessThan", "greaterThanOrEqual", "lessThanOrEqual"]), Some(json!({"type": ["string", "number"]}))),
            branch(data.clone(), ops(&["in", "notIn"]), Some(list)),
            timed(data, ops(&["within", "olderThan"])),
            branch(event.clone(), ops(&["triggered", "notTriggered"]), None),
            timed(event, ops(&["triggeredWithin", "triggeredOlderThan"])),
        ],
    })
}

impl FilterDocument {
    /// The group this document states, named as `field` in errors: at most `max_bytes`
    /// of JSON, then every problem the parser finds.
    pub fn parse(
        &self,
        field: &str,
        max_bytes: usize,
    ) -> Result<super::Group, Vec<crate::FieldError>> {
        crate::model::data::json_within(field, &self.0, max_bytes).map_err(|e| vec![e])?;
        super::Group::parse(&self.0, field)
    }
}

fn group() -> Value {
    json!({
        "type": "object",
        "description": "A filter group: AND or OR over its conditions, which may be groups in turn.",
        "required": ["operator", "conditions"],
        "properties": {
            "operator": {"type": "string", "enum": ["AND", "OR"]},
            "conditions": {
                "type": "array",
                "items": {"anyOf": [{"$ref": "#/components/schemas/FilterGroup"}, condition()]},
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_says_what_the_parser_needs() {
        let back = FilterDocument::json_schema();
        assert_eq!(back["required"], json!(["operator", "conditions"]));
    }
}
