//! The filter language of API.md section 8, parsed from JSON into a typed tree.
//!
//! Parsing is where every check happens: an unknown operator, one that does not fit
//! its field, or an operand of the wrong type is a field error naming the path of the
//! offending item (`filters.conditions.1.conditions.0.operator`). A `Filter` that
//! exists is valid; `compile` turns it into an evaluator (see `eval`).

use serde_json::{json, Map, Value};

use crate::error::{FieldCode, FieldError};
use crate::model::Timestamp;

/// The most items an `in` / `notIn` list may hold.
pub const MAX_IN_VALUES: usize = 1000;
/// The longest relative period (within, olderThan, ...): about 100 years.
const MAX_PERIOD_MS: f64 = 100.0 * 366.0 * 86_400_000.0;

#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Group(Group),
    Condition(Condition),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub op: GroupOp,
    pub items: Vec<Filter>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOp {
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Email(TextTest),
    Subscribed(BoolTest),
    /// `createdAt` (`updated == false`) or `updatedAt`.
    Date {
        updated: bool,
        test: DateTest,
    },
    /// `data.<path>`: the path's segments, at least one.
    Data {
        path: Vec<String>,
        test: DataTest,
    },
    /// `event.<name>`.
    Event {
        name: String,
        test: EventTest,
    },
}

/// Tests on the email (already lowercased, so operands are lowercased too).
#[derive(Debug, Clone, PartialEq)]
pub enum TextTest {
    Equals(String),
    NotEquals(String),
    Contains(String),
    NotContains(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BoolTest {
    Equals(bool),
    NotEquals(bool),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Cmp {
    pub fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        matches!(
            (self, ord),
            (Cmp::Gt, Greater)
                | (Cmp::Lt, Less)
                | (Cmp::Gte, Greater | Equal)
                | (Cmp::Lte, Less | Equal)
        )
    }

    fn name(self) -> &'static str {
        match self {
            Cmp::Gt => "greaterThan",
            Cmp::Lt => "lessThan",
            Cmp::Gte => "greaterThanOrEqual",
            Cmp::Lte => "lessThanOrEqual",
        }
    }
}

/// A relative period, kept as given (for the stored form) and in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    pub amount: f64,
    pub unit: PeriodUnit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodUnit {
    Minutes,
    Hours,
    Days,
}

impl PeriodUnit {
    fn name(self) -> &'static str {
        match self {
            PeriodUnit::Minutes => "minutes",
            PeriodUnit::Hours => "hours",
            PeriodUnit::Days => "days",
        }
    }

    fn millis(self) -> f64 {
        match self {
            PeriodUnit::Minutes => 60_000.0,
            PeriodUnit::Hours => 3_600_000.0,
            PeriodUnit::Days => 86_400_000.0,
        }
    }
}

impl Period {
    pub fn millis(&self) -> i64 {
        (self.amount * self.unit.millis()) as i64
    }
}

/// Tests on `createdAt` / `updatedAt`; instants are milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DateTest {
    Equals(i64),
    NotEquals(i64),
    Compare(Cmp, i64),
    Within(Period),
    OlderThan(Period),
    Exists,
    NotExists,
}

/// Tests on a `data.<path>` value, which may be missing or of any JSON type.
#[derive(Debug, Clone, PartialEq)]
pub enum DataTest {
    Equals(Value),
    NotEquals(Value),
    Contains(Value),
    NotContains(Value),
    /// A number, or a string (compared as instants when both sides are dates).
    Compare(Cmp, Value),
    In(Vec<Value>),
    NotIn(Vec<Value>),
    Within(Period),
    OlderThan(Period),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EventTest {
    Triggered,
    NotTriggered,
    /// The last occurrence is at most this long ago.
    TriggeredWithin(Period),
    /// Triggered, and the last occurrence is more than this long ago.
    TriggeredOlderThan(Period),
}

/// Reads an instant: RFC 3339 (`2026-01-31T12:00:00Z`, any offset) or a date
/// (`2026-01-31`, midnight UTC).
pub fn parse_instant(s: &str) -> Option<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s.trim()) {
        return Some(t.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
}

/// Collects every problem of one filter, each named by its path.
struct Parser {
    errors: Vec<FieldError>,
}

impl Parser {
    fn err(&mut self, path: &str, code: FieldCode, msg: impl Into<String>) {
        self.errors.push(FieldError::new(path, code, msg));
    }

    fn group(&mut self, v: &Value, path: &str) -> Option<Group> {
        let Some(obj) = v.as_object() else {
            self.err(path, FieldCode::InvalidType, "Expected object");
            return None;
        };
        let op = match obj.get("operator") {
            None | Some(Value::Null) => {
                self.err(
                    &format!("{path}.operator"),
                    FieldCode::InvalidType,
                    "Required",
                );
                None
            }
            Some(Value::String(s)) if s.eq_ignore_ascii_case("and") => Some(GroupOp::And),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("or") => Some(GroupOp::Or),
            Some(_) => {
                self.err(
                    &format!("{path}.operator"),
                    FieldCode::InvalidEnumValue,
                    "A group's operator must be AND or OR",
                );
                None
            }
        };
        let items = match obj.get("conditions") {
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.item(item, &format!("{path}.conditions.{i}")))
                    .collect::<Vec<_>>(),
            ),
            None | Some(Value::Null) => {
                self.err(
                    &format!("{path}.conditions"),
                    FieldCode::InvalidType,
                    "Required",
                );
                None
            }
            Some(_) => {
                self.err(
                    &format!("{path}.conditions"),
                    FieldCode::InvalidType,
                    "Expected array",
                );
                None
            }
        };
        Some(Group {
            op: op?,
            items: items?,
        })
    }

    /// A nested group (it has `conditions`) or a condition.
    fn item(&mut self, v: &Value, path: &str) -> Option<Filter> {
        if v.get("conditions").is_some() {
            return self.group(v, path).map(Filter::Group);
        }
        let Some(obj) = v.as_object() else {
            self.err(path, FieldCode::InvalidType, "Expected object");
            return None;
        };
        self.condition(obj, path).map(Filter::Condition)
    }

    fn condition(&mut self, obj: &Map<String, Value>, path: &str) -> Option<Condition> {
        let field = self.string_at(obj, "field", path);
        let op = self.string_at(obj, "operator", path);
        let (field, op) = (field?, op?);
        let op_path = format!("{path}.operator");
        let Some(op) = Op::parse(op) else {
            self.err(
                &op_path,
                FieldCode::InvalidEnumValue,
                format!("Unknown operator '{op}'"),
            );
            return None;
        };
        let value = obj.get("value").filter(|v| !v.is_null());
        let c = Ctx {
            path,
            value,
            unit: obj.get("unit"),
        };
        match field {
            "email" => self.email(op, &c).map(Condition::Email),
            "subscribed" => self.subscribed(op, &c).map(Condition::Subscribed),
            "createdAt" | "updatedAt" => self.date(op, &c).map(|test| Condition::Date {
                updated: field == "updatedAt",
                test,
            }),
            f if f.starts_with("data.") => {
                let path_parts: Vec<String> =
                    f["data.".len()..].split('.').map(str::to_owned).collect();
                if path_parts.iter().any(|p| p.is_empty()) {
                    self.err(
                        &format!("{path}.field"),
                        FieldCode::InvalidString,
                        "data fields are data.<key> or data.<key>.<nested key>",
                    );
                    return None;
                }
                self.data(op, &c).map(|test| Condition::Data {
                    path: path_parts,
                    test,
                })
            }
            f if f.starts_with("event.") && f.len() > "event.".len() => {
                let name = f["event.".len()..].to_owned();
                self.event(op, &c)
                    .map(|test| Condition::Event { name, test })
            }
            other => {
                self.err(
                    &format!("{path}.field"),
                    FieldCode::InvalidEnumValue,
                    format!(
                        "Unknown field '{other}': use email, subscribed, createdAt, updatedAt, data.<key> or event.<name>"
                    ),
                );
                None
            }
        }
    }

    fn string_at<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Option<&'v str> {
        match obj.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(Value::String(_)) => {
                self.err(
                    &format!("{path}.{key}"),
                    FieldCode::TooSmall,
                    "String must contain at least 1 character(s)",
                );
                None
            }
            None | Some(Value::Null) => {
                self.err(&format!("{path}.{key}"), FieldCode::InvalidType, "Required");
                None
            }
            Some(_) => {
                self.err(
                    &format!("{path}.{key}"),
                    FieldCode::InvalidType,
                    "Expected string",
                );
                None
            }
        }
    }

    fn misfit(&mut self, c: &Ctx, op: Op, field: &str) {
        self.err(
            &format!("{}.operator", c.path),
            FieldCode::Custom,
            format!("The operator '{}' does not apply to {field}", op.name()),
        );
    }

    fn required_value<'v>(&mut self, c: &Ctx<'v>) -> Option<&'v Value> {
        if c.value.is_none() {
            self.err(
                &format!("{}.value", c.path),
                FieldCode::InvalidType,
                "Required",
            );
        }
        c.value
    }

    fn expect_string(&mut self, c: &Ctx) -> Option<String> {
        match self.required_value(c)? {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.err(
                    &format!("{}.value", c.path),
                    FieldCode::InvalidType,
                    "Expected string",
                );
                None
            }
        }
    }

    fn expect_array(&mut self, c: &Ctx) -> Option<Vec<Value>> {
        match self.required_value(c)? {
            Value::Array(items) if items.len() <= MAX_IN_VALUES => Some(items.clone()),
            Value::Array(_) => {
                self.err(
                    &format!("{}.value", c.path),
                    FieldCode::TooBig,
                    format!("Array must contain at most {MAX_IN_VALUES} element(s)"),
                );
                None
            }
            _ => {
                self.err(
                    &format!("{}.value", c.path),
                    FieldCode::InvalidType,
                    "Expected array",
                );
                None
            }
        }
    }

    fn period(&mut self, c: &Ctx) -> Option<Period> {
        let amount = match self.required_value(c)? {
            Value::Number(n) => n.as_f64().filter(|f| f.is_finite() && *f >= 0.0),
            _ => {
                self.err(
                    &format!("{}.value", c.path),
                    FieldCode::InvalidType,
                    "Expected number",
                );
                return None;
            }
        };
        let Some(amount) = amount else {
            self.err(
                &format!("{}.value", c.path),
                FieldCode::TooSmall,
                "The amount must be a number of at least 0",
            );
            return None;
        };
        let unit = match c.unit {
            // Days when omitted: the unit most filters mean.
            None | Some(Value::Null) => PeriodUnit::Days,
            Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "minutes" | "minute" => PeriodUnit::Minutes,
                "hours" | "hour" => PeriodUnit::Hours,
                "days" | "day" => PeriodUnit::Days,
                _ => {
                    self.err(
                        &format!("{}.unit", c.path),
                        FieldCode::InvalidEnumValue,
                        "unit must be minutes, hours or days",
                    );
                    return None;
                }
            },
            Some(_) => {
                self.err(
                    &format!("{}.unit", c.path),
                    FieldCode::InvalidType,
                    "Expected string",
                );
                return None;
            }
        };
        if amount * unit.millis() > MAX_PERIOD_MS {
            self.err(
                &format!("{}.value", c.path),
                FieldCode::TooBig,
                "The period must be at most 100 years",
            );
            return None;
        }
        Some(Period { amount, unit })
    }

    fn email(&mut self, op: Op, c: &Ctx) -> Option<TextTest> {
        let lower = |s: String| s.trim().to_lowercase();
        Some(match op {
            Op::Equals => TextTest::Equals(lower(self.expect_string(c)?)),
            Op::NotEquals => TextTest::NotEquals(lower(self.expect_string(c)?)),
            Op::Contains => TextTest::Contains(lower(self.expect_string(c)?)),
            Op::NotContains => TextTest::NotContains(lower(self.expect_string(c)?)),
            Op::In | Op::NotIn => {
                let items = self.expect_array(c)?;
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item.as_str() {
                        Some(s) => out.push(lower(s.to_owned())),
                        None => {
                            self.err(
                                &format!("{}.value.{i}", c.path),
                                FieldCode::InvalidType,
                                "Expected string",
                            );
                            return None;
                        }
                    }
                }
                if op == Op::In {
                    TextTest::In(out)
                } else {
                    TextTest::NotIn(out)
                }
            }
            Op::Exists => TextTest::Exists,
            Op::NotExists => TextTest::NotExists,
            _ => {
                self.misfit(c, op, "email");
                return None;
            }
        })
    }

    fn subscribed(&mut self, op: Op, c: &Ctx) -> Option<BoolTest> {
        let boolean = |p: &mut Parser| match p.required_value(c)? {
            Value::Bool(b) => Some(*b),
            _ => {
                p.err(
                    &format!("{}.value", c.path),
                    FieldCode::InvalidType,
                    "Expected boolean",
                );
                None
            }
        };
        Some(match op {
            Op::Equals => BoolTest::Equals(boolean(self)?),
            Op::NotEquals => BoolTest::NotEquals(boolean(self)?),
            Op::Exists => BoolTest::Exists,
            Op::NotExists => BoolTest::NotExists,
            _ => {
                self.misfit(c, op, "subscribed");
                return None;
            }
        })
    }

    fn instant(&mut self, c: &Ctx) -> Option<i64> {
        let s = self.expect_string(c)?;
        let t = parse_instant(&s);
        if t.is_none() {
            self.err(
                &format!("{}.value", c.path),
                FieldCode::InvalidString,
                "Expected an ISO 8601 date, such as 2026-01-31T00:00:00Z",
            );
        }
        t
    }

    fn date(&mut self, op: Op, c: &Ctx) -> Option<DateTest> {
        Some(match op {
            Op::Equals => DateTest::Equals(self.instant(c)?),
            Op::NotEquals => DateTest::NotEquals(self.instant(c)?),
            Op::Compare(cmp) => DateTest::Compare(cmp, self.instant(c)?),
            Op::Within => DateTest::Within(self.period(c)?),
            Op::OlderThan => DateTest::OlderThan(self.period(c)?),
            Op::Exists => DateTest::Exists,
            Op::NotExists => DateTest::NotExists,
            _ => {
                self.misfit(c, op, "a date field");
                return None;
            }
        })
    }

    fn data(&mut self, op: Op, c: &Ctx) -> Option<DataTest> {
        let value_path = format!("{}.value", c.path);
        Some(match op {
            Op::Equals => DataTest::Equals(self.required_value(c)?.clone()),
            Op::NotEquals => DataTest::NotEquals(self.required_value(c)?.clone()),
            Op::Contains | Op::NotContains => {
                let v = self.required_value(c)?;
                if v.is_object() || v.is_array() {
                    self.err(
                        &value_path,
                        FieldCode::InvalidType,
                        "Expected a string, number or boolean",
                    );
                    return None;
                }
                if op == Op::Contains {
                    DataTest::Contains(v.clone())
                } else {
                    DataTest::NotContains(v.clone())
                }
            }
            Op::Compare(cmp) => {
                let v = self.required_value(c)?;
                if !(v.is_number() || v.is_string()) {
                    self.err(
                        &value_path,
                        FieldCode::InvalidType,
                        "Expected number or string",
                    );
                    return None;
                }
                DataTest::Compare(cmp, v.clone())
            }
            Op::In => DataTest::In(self.expect_array(c)?),
            Op::NotIn => DataTest::NotIn(self.expect_array(c)?),
            Op::Within => DataTest::Within(self.period(c)?),
            Op::OlderThan => DataTest::OlderThan(self.period(c)?),
            Op::Exists => DataTest::Exists,
            Op::NotExists => DataTest::NotExists,
            Op::Triggered | Op::NotTriggered | Op::TriggeredWithin | Op::TriggeredOlderThan => {
                self.misfit(c, op, "a data field");
                return None;
            }
        })
    }

    fn event(&mut self, op: Op, c: &Ctx) -> Option<EventTest> {
        Some(match op {
            Op::Triggered => EventTest::Triggered,
            Op::NotTriggered => EventTest::NotTriggered,
            Op::TriggeredWithin => EventTest::TriggeredWithin(self.period(c)?),
            Op::TriggeredOlderThan => EventTest::TriggeredOlderThan(self.period(c)?),
            _ => {
                self.misfit(c, op, "an event field");
                return None;
            }
        })
    }
}

struct Ctx<'v> {
    path: &'v str,
    value: Option<&'v Value>,
    unit: Option<&'v Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    NotEquals,
    Contains,
    NotContains,
    Compare(Cmp),
    Exists,
    NotExists,
    In,
    NotIn,
    Within,
    OlderThan,
    Triggered,
    NotTriggered,
    TriggeredWithin,
    TriggeredOlderThan,
}

impl Op {
    const ALL: [Op; 18] = [
        Op::Equals,
        Op::NotEquals,
        Op::Contains,
        Op::NotContains,
        Op::Compare(Cmp::Gt),
        Op::Compare(Cmp::Lt),
        Op::Compare(Cmp::Gte),
        Op::Compare(Cmp::Lte),
        Op::Exists,
        Op::NotExists,
        Op::In,
        Op::NotIn,
        Op::Within,
        Op::OlderThan,
        Op::Triggered,
        Op::NotTriggered,
        Op::TriggeredWithin,
        Op::TriggeredOlderThan,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::Equals => "equals",
            Op::NotEquals => "notEquals",
            Op::Contains => "contains",
            Op::NotContains => "notContains",
            Op::Compare(c) => c.name(),
            Op::Exists => "exists",
            Op::NotExists => "notExists",
            Op::In => "in",
            Op::NotIn => "notIn",
            Op::Within => "within",
            Op::OlderThan => "olderThan",
            Op::Triggered => "triggered",
            Op::NotTriggered => "notTriggered",
            Op::TriggeredWithin => "triggeredWithin",
            Op::TriggeredOlderThan => "triggeredOlderThan",
        }
    }

    /// Operators are matched without regard to case (`EQUALS` is `equals`).
    fn parse(s: &str) -> Option<Op> {
        Op::ALL
            .into_iter()
            .find(|op| op.name().eq_ignore_ascii_case(s))
    }
}

impl Group {
    /// Parses a filter whose top level is a group, as segments and campaign audience
    /// filters have it. `path` names the field in errors (`filters`, `audienceFilter`).
    pub fn parse(v: &Value, path: &str) -> Result<Group, Vec<FieldError>> {
        let mut p = Parser { errors: Vec::new() };
        let group = p.group(v, path);
        match group {
            Some(g) if p.errors.is_empty() => Ok(g),
            _ => Err(p.errors),
        }
    }
}

impl Condition {
    /// Parses one condition `{field, operator, value?, unit?}` on its own, as a workflow
    /// CONDITION step holds it.
    pub fn parse(v: &Value, path: &str) -> Result<Condition, Vec<FieldError>> {
        let mut p = Parser { errors: Vec::new() };
        let c = match v.as_object() {
            Some(obj) => p.condition(obj, path),
            None => {
                p.err(path, FieldCode::InvalidType, "Expected object");
                None
            }
        };
        match c {
            Some(c) if p.errors.is_empty() => Ok(c),
            _ => Err(p.errors),
        }
    }
}

impl Group {
    /// The canonical JSON form (what is stored and shown): operators as the API spells
    /// them, dates as ISO strings.
    pub fn to_json(&self) -> Value {
        let op = match self.op {
            GroupOp::And => "AND",
            GroupOp::Or => "OR",
        };
        let items: Vec<Value> = self
            .items
            .iter()
            .map(|f| match f {
                Filter::Group(g) => g.to_json(),
                Filter::Condition(c) => c.to_json(),
            })
            .collect();
        json!({"operator": op, "conditions": items})
    }

    /// Every event name the filter asks about, once each.
    pub fn event_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.visit(&mut |c| {
            if let Condition::Event { name, .. } = c {
                if !out.contains(name) {
                    out.push(name.clone());
                }
            }
        });
        out
    }

    pub fn visit(&self, f: &mut impl FnMut(&Condition)) {
        for item in &self.items {
            match item {
                Filter::Group(g) => g.visit(f),
                Filter::Condition(c) => f(c),
            }
        }
    }
}

impl Condition {
    pub fn to_json(&self) -> Value {
        let iso = |ms: &i64| Value::String(Timestamp::from(*ms).to_iso());
        let strings = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
        let period = |field: String, op: &str, p: &Period| json!({"field": field, "operator": op, "value": p.amount, "unit": p.unit.name()});
        let simple = |field: String, op: &str, value: Option<Value>| match value {
            Some(v) => json!({"field": field, "operator": op, "value": v}),
            None => json!({"field": field, "operator": op}),
        };
        match self {
            Condition::Email(t) => {
                let f = "email".to_owned();
                match t {
                    TextTest::Equals(s) => simple(f, "equals", Some(json!(s))),
                    TextTest::NotEquals(s) => simple(f, "notEquals", Some(json!(s))),
                    TextTest::Contains(s) => simple(f, "contains", Some(json!(s))),
                    TextTest::NotContains(s) => simple(f, "notContains", Some(json!(s))),
                    TextTest::In(v) => simple(f, "in", Some(strings(v))),
                    TextTest::NotIn(v) => simple(f, "notIn", Some(strings(v))),
                    TextTest::Exists => simple(f, "exists", None),
                    TextTest::NotExists => simple(f, "notExists", None),
                }
            }
            Condition::Subscribed(t) => {
                let f = "subscribed".to_owned();
                match t {
                    BoolTest::Equals(b) => simple(f, "equals", Some(json!(b))),
                    BoolTest::NotEquals(b) => simple(f, "notEquals", Some(json!(b))),
                    BoolTest::Exists => simple(f, "exists", None),
                    BoolTest::NotExists => simple(f, "notExists", None),
                }
            }
            Condition::Date { updated, test } => {
                let f = if *updated { "updatedAt" } else { "createdAt" }.to_owned();
                match test {
                    DateTest::Equals(t) => simple(f, "equals", Some(iso(t))),
                    DateTest::NotEquals(t) => simple(f, "notEquals", Some(iso(t))),
                    DateTest::Compare(c, t) => simple(f, c.name(), Some(iso(t))),
                    DateTest::Within(p) => period(f, "within", p),
                    DateTest::OlderThan(p) => period(f, "olderThan", p),
                    DateTest::Exists => simple(f, "exists", None),
                    DateTest::NotExists => simple(f, "notExists", None),
                }
            }
            Condition::Data { path, test } => {
                let f = format!("data.{}", path.join("."));
                match test {
                    DataTest::Equals(v) => simple(f, "equals", Some(v.clone())),
                    DataTest::NotEquals(v) => simple(f, "notEquals", Some(v.clone())),
                    DataTest::Contains(v) => simple(f, "contains", Some(v.clone())),
                    DataTest::NotContains(v) => simple(f, "notContains", Some(v.clone())),
                    DataTest::Compare(c, v) => simple(f, c.name(), Some(v.clone())),
                    DataTest::In(v) => simple(f, "in", Some(Value::Array(v.clone()))),
                    DataTest::NotIn(v) => simple(f, "notIn", Some(Value::Array(v.clone()))),
                    DataTest::Within(p) => period(f, "within", p),
                    DataTest::OlderThan(p) => period(f, "olderThan", p),
                    DataTest::Exists => simple(f, "exists", None),
                    DataTest::NotExists => simple(f, "notExists", None),
                }
            }
            Condition::Event { name, test } => {
                let f = format!("event.{name}");
                match test {
                    EventTest::Triggered => simple(f, "triggered", None),
                    EventTest::NotTriggered => simple(f, "notTriggered", None),
                    EventTest::TriggeredWithin(p) => period(f, "triggeredWithin", p),
                    EventTest::TriggeredOlderThan(p) => period(f, "triggeredOlderThan", p),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<Group, Vec<FieldError>> {
        Group::parse(&v, "filters")
    }

    fn first_error(v: Value) -> FieldError {
        parse(v).unwrap_err().remove(0)
    }

    #[test]
    fn a_nested_filter_parses_and_round_trips_through_its_json_form() {
        let g = parse(json!({"operator": "AND", "conditions": [
            {"field": "data.plan", "operator": "equals", "value": "pro"},
            {"operator": "or", "conditions": [
                {"field": "createdAt", "operator": "within", "value": 7, "unit": "days"},
                {"field": "event.signup", "operator": "triggered"},
                {"field": "email", "operator": "in", "value": ["A@x.io"]}
            ]}
        ]}))
        .unwrap();
        assert_eq!(g.items.len(), 2);
        assert_eq!(parse(g.to_json()).unwrap(), g);
        assert_eq!(g.event_names(), ["signup"]);
    }

    #[test]
    fn an_unknown_operator_is_named_by_its_path() {
        let e = first_error(json!({"operator": "AND", "conditions": [
            {"operator": "OR", "conditions": [{"field": "email", "operator": "startsWith", "value": "a"}]}
        ]}));
        assert_eq!(e.field, "filters.conditions.0.conditions.0.operator");
        assert_eq!(e.code, FieldCode::InvalidEnumValue);
    }

    #[test]
    fn operators_that_do_not_fit_their_field_are_refused() {
        for (field, op) in [
            ("subscribed", "contains"),
            ("email", "greaterThan"),
            ("email", "within"),
            ("createdAt", "contains"),
            ("createdAt", "in"),
            ("data.plan", "triggered"),
            ("event.signup", "equals"),
            ("event.signup", "exists"),
        ] {
            let e = first_error(json!({"operator": "AND", "conditions": [
                {"field": field, "operator": op, "value": "x"}
            ]}));
            assert_eq!(e.field, "filters.conditions.0.operator", "{field} {op}");
            assert_eq!(e.code, FieldCode::Custom, "{field} {op}");
        }
    }

    #[test]
    fn operands_of_the_wrong_type_are_refused() {
        for cond in [
            json!({"field": "subscribed", "operator": "equals", "value": "yes"}),
            json!({"field": "data.tags", "operator": "in", "value": "pro"}),
            json!({"field": "createdAt", "operator": "within", "value": "7"}),
            json!({"field": "createdAt", "operator": "greaterThan", "value": "yesterday"}),
            json!({"field": "createdAt", "operator": "within", "value": 7, "unit": "weeks"}),
            json!({"field": "data.plan", "operator": "equals"}),
            json!({"field": "nope", "operator": "equals", "value": 1}),
            json!({"field": "data.", "operator": "exists"}),
        ] {
            assert!(
                parse(json!({"operator": "AND", "conditions": [cond.clone()]})).is_err(),
                "{cond}"
            );
        }
    }

    #[test]
    fn a_group_needs_and_or_or_and_a_list() {
        assert!(parse(json!({"operator": "XOR", "conditions": []})).is_err());
        assert!(parse(json!({"operator": "AND"})).is_err());
        assert!(parse(json!({"conditions": []})).is_err());
        assert!(parse(json!([])).is_err());
        assert!(parse(json!({"operator": "and", "conditions": []})).is_ok());
    }

    #[test]
    fn instants_are_rfc3339_or_plain_dates() {
        assert_eq!(parse_instant("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(parse_instant("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_instant("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_instant("soon"), None);
    }
}
