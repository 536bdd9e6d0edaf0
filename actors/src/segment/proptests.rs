//! Property test: random filters, evaluated by the compiled evaluator, agree with a
//! plain reference evaluation (a direct walk of the parsed tree) over random contacts.
//! The filters are generated as JSON, so the parser is exercised too, and every one
//! must also survive a round trip through its canonical JSON form.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::eval::{json_eq, Compiled, ContactSubject};
use super::filter::{
    parse_instant, BoolTest, Condition, DataTest, DateTest, EventTest, Filter, Group, GroupOp,
    TextTest,
};
use crate::model::{Contact, ContactId, EmailAddress, EventStats, Timestamp};

const NOW: i64 = 1_800_000_000_000;
const DAY: i64 = 86_400_000;

// ---- the reference: no slots, no compilation, every rule spelled out again ----

fn reference(g: &Group, c: &Contact, events: &HashMap<String, EventStats>) -> bool {
    let mut results = g.items.iter().map(|f| match f {
        Filter::Group(g) => reference(g, c, events),
        Filter::Condition(cond) => reference_condition(cond, c, events),
    });
    match g.op {
        GroupOp::And => results.all(|b| b),
        GroupOp::Or => results.any(|b| b),
    }
}

fn reference_condition(
    cond: &Condition,
    c: &Contact,
    events: &HashMap<String, EventStats>,
) -> bool {
    let email = c.email.as_str();
    match cond {
        Condition::Email(t) => match t {
            TextTest::Equals(s) => email == s,
            TextTest::NotEquals(s) => email != s,
            TextTest::Contains(s) => email.contains(s.as_str()),
            TextTest::NotContains(s) => !email.contains(s.as_str()),
            TextTest::In(v) => v.iter().any(|s| s == email),
            TextTest::NotIn(v) => !v.iter().any(|s| s == email),
            TextTest::Exists => true,
            TextTest::NotExists => false,
        },
        Condition::Subscribed(t) => match t {
            BoolTest::Equals(b) => c.subscribed == *b,
            BoolTest::NotEquals(b) => c.subscribed != *b,
            BoolTest::Exists => true,
            BoolTest::NotExists => false,
        },
        Condition::Date { updated, test } => {
            let t = if *updated { c.updated_at } else { c.created_at }.millis();
            match test {
                DateTest::Equals(x) => t == *x,
                DateTest::NotEquals(x) => t != *x,
                DateTest::Compare(cmp, x) => cmp.holds(t.cmp(x)),
                DateTest::Within(p) => t >= NOW - p.millis(),
                DateTest::OlderThan(p) => t < NOW - p.millis(),
                DateTest::Exists => true,
                DateTest::NotExists => false,
            }
        }
        Condition::Data { path, test } => {
            let mut v = c.data.get(&path[0]);
            for k in &path[1..] {
                v = v.and_then(|v| v.as_object()).and_then(|o| o.get(k));
            }
            let v = v.filter(|v| !v.is_null());
            let present = |f: &dyn Fn(&Value) -> bool| v.is_some_and(f);
            let contains = |x: &Value| {
                present(&|v| match v {
                    Value::String(s) => x.as_str().is_some_and(|n| s.contains(n)),
                    Value::Array(a) => a.iter().any(|i| json_eq(i, x)),
                    _ => false,
                })
            };
            match test {
                DataTest::Equals(x) => present(&|v| json_eq(v, x)),
                DataTest::NotEquals(x) => !present(&|v| json_eq(v, x)),
                DataTest::Contains(x) => contains(x),
                DataTest::NotContains(x) => !contains(x),
                DataTest::Compare(cmp, x) => present(&|v| match (v, x) {
                    (Value::Number(a), Value::Number(b)) => a
                        .as_f64()
                        .unwrap()
                        .partial_cmp(&b.as_f64().unwrap())
                        .is_some_and(|o| cmp.holds(o)),
                    (Value::String(a), Value::String(b)) => {
                        match (parse_instant(a), parse_instant(b)) {
                            (Some(ta), Some(tb)) => cmp.holds(ta.cmp(&tb)),
                            _ => cmp.holds(a.cmp(b)),
                        }
                    }
                    _ => false,
                }),
                DataTest::In(xs) => present(&|v| xs.iter().any(|x| json_eq(v, x))),
                DataTest::NotIn(xs) => !present(&|v| xs.iter().any(|x| json_eq(v, x))),
                DataTest::Within(p) => present(&|v| {
                    v.as_str()
                        .and_then(parse_instant)
                        .is_some_and(|t| t >= NOW - p.millis())
                }),
                DataTest::OlderThan(p) => present(&|v| {
                    v.as_str()
                        .and_then(parse_instant)
                        .is_some_and(|t| t < NOW - p.millis())
                }),
                DataTest::Exists => v.is_some(),
                DataTest::NotExists => v.is_none(),
            }
        }
        Condition::Event { name, test } => {
            let st = events.get(name).filter(|s| s.count > 0);
            match test {
                EventTest::Triggered => st.is_some(),
                EventTest::NotTriggered => st.is_none(),
                EventTest::TriggeredWithin(p) => st.is_some_and(|s| s.last_at >= NOW - p.millis()),
                EventTest::TriggeredOlderThan(p) => {
                    st.is_some_and(|s| s.last_at < NOW - p.millis())
                }
            }
        }
    }
}

// ---- generators ----

fn iso(ms: i64) -> String {
    Timestamp::from(ms).to_iso()
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec!["free", "pro", "team", "a", "b"]).prop_map(|s| json!(s)),
        (-3i64..10).prop_map(|n| json!(n)),
        (-3i64..10).prop_map(|n| json!(n as f64 + 0.5)),
        any::<bool>().prop_map(|b| json!(b)),
        (0i64..20).prop_map(|d| json!(iso(NOW - d * DAY))),
    ]
}

fn data_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => scalar(),
        1 => Just(Value::Null),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
        1 => scalar().prop_map(|v| json!({"x": v})),
    ]
}

fn contact() -> impl Strategy<Value = (Contact, HashMap<String, EventStats>)> {
    let keys = prop::sample::select(vec!["plan", "n", "tags", "nested", "when"]);
    (
        prop::sample::select(vec!["ada@acme.com", "bob@example.com", "cy@acme.io"]),
        any::<bool>(),
        0i64..30,
        0i64..30,
        prop::collection::btree_map(keys.prop_map(str::to_owned), data_value(), 0..5),
        prop::collection::vec(
            (prop::sample::select(vec!["buy", "open", "login"]), 0i64..20),
            0..4,
        ),
    )
        .prop_map(|(email, subscribed, created, updated, data, evs)| {
            let mut events: HashMap<String, EventStats> = HashMap::new();
            for (name, days) in evs {
                events
                    .entry(name.to_owned())
                    .or_default()
                    .add(NOW - days * DAY);
            }
            let c = Contact {
                id: ContactId::new(),
                email: EmailAddress::parse(email).unwrap(),
                subscribed,
                data: data.into_iter().collect(),
                created_at: Timestamp::from(NOW - created * DAY),
                updated_at: Timestamp::from(NOW - updated * DAY),
            };
            (c, events)
        })
}

fn period() -> impl Strategy<Value = (i64, &'static str)> {
    (
        0i64..25,
        prop::sample::select(vec!["minutes", "hours", "days"]),
    )
        .prop_map(|(n, unit)| {
            if unit == "days" {
                (n, unit)
            } else {
                (n * 24 * 60, unit)
            }
        })
}

fn condition() -> impl Strategy<Value = Value> {
    let data_field = prop::sample::select(vec![
        "data.plan",
        "data.n",
        "data.tags",
        "data.nested.x",
        "data.when",
        "data.none",
    ]);
    let data_op = prop::sample::select(vec!["equals", "notEquals", "contains", "notContains"]);
    let compare_op = prop::sample::select(vec![
        "greaterThan",
        "lessThan",
        "greaterThanOrEqual",
        "lessThanOrEqual",
    ]);
    let comparable = scalar().prop_filter("numbers and strings compare", |v| !v.is_boolean());
    prop_oneof![
        (
            prop::sample::select(vec!["equals", "notEquals", "contains", "notContains"]),
            prop::sample::select(vec!["ada@acme.com", "acme", "@example.com", "x"])
        )
            .prop_map(|(op, v)| json!({"field": "email", "operator": op, "value": v})),
        (
            prop::sample::select(vec!["in", "notIn"]),
            prop::collection::vec(
                prop::sample::select(vec!["ada@acme.com", "bob@example.com", "zed@z.io"]),
                0..3
            )
        )
            .prop_map(|(op, v)| json!({"field": "email", "operator": op, "value": v})),
        (
            prop::sample::select(vec!["equals", "notEquals"]),
            any::<bool>()
        )
            .prop_map(|(op, v)| json!({"field": "subscribed", "operator": op, "value": v})),
        (
            prop::sample::select(vec!["createdAt", "updatedAt"]),
            prop::sample::select(vec![
                "greaterThan",
                "lessThan",
                "greaterThanOrEqual",
                "lessThanOrEqual",
                "equals",
                "notEquals"
            ]),
            0i64..30
        )
            .prop_map(
                |(f, op, d)| json!({"field": f, "operator": op, "value": iso(NOW - d * DAY)})
            ),
        (
            prop::sample::select(vec!["createdAt", "updatedAt", "data.when", "data.plan"]),
            prop::sample::select(vec!["within", "olderThan"]),
            period()
        )
            .prop_map(
                |(f, op, (n, unit))| json!({"field": f, "operator": op, "value": n, "unit": unit})
            ),
        (data_field.clone(), data_op, scalar())
            .prop_map(|(f, op, v)| json!({"field": f, "operator": op, "value": v})),
        (data_field.clone(), compare_op, comparable)
            .prop_map(|(f, op, v)| json!({"field": f, "operator": op, "value": v})),
        (
            data_field.clone(),
            prop::sample::select(vec!["in", "notIn"]),
            prop::collection::vec(scalar(), 0..4)
        )
            .prop_map(|(f, op, v)| json!({"field": f, "operator": op, "value": v})),
        (
            data_field,
            prop::sample::select(vec!["exists", "notExists"])
        )
            .prop_map(|(f, op)| json!({"field": f, "operator": op})),
        (
            prop::sample::select(vec!["event.buy", "event.open", "event.never"]),
            prop::sample::select(vec![
                "triggered",
                "notTriggered",
                "triggeredWithin",
                "triggeredOlderThan"
            ]),
            period()
        )
            .prop_map(
                |(f, op, (n, unit))| json!({"field": f, "operator": op, "value": n, "unit": unit})
            ),
    ]
}

fn filter() -> impl Strategy<Value = Value> {
    let group = |items: Vec<Value>, or: bool| json!({"operator": if or { "OR" } else { "AND" }, "conditions": items});
    let leaf = (prop::collection::vec(condition(), 0..4), any::<bool>())
        .prop_map(move |(items, or)| group(items, or));
    leaf.prop_recursive(4, 40, 4, move |inner| {
        (
            prop::collection::vec(prop_oneof![condition(), inner], 0..4),
            any::<bool>(),
        )
            .prop_map(move |(items, or)| group(items, or))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_compiled_evaluator_agrees_with_the_reference(
        f in filter(),
        contacts in prop::collection::vec(contact(), 1..8),
    ) {
        let g = Group::parse(&f, "filters").expect("generated filters are valid");
        prop_assert_eq!(Group::parse(&g.to_json(), "filters").unwrap(), g.clone());
        let compiled = Compiled::new(&g);
        for (c, events) in &contacts {
            let stats: Vec<Option<EventStats>> = compiled
                .event_names()
                .iter()
                .map(|n| events.get(n).copied())
                .collect();
            let fast = compiled.matches(&ContactSubject::new(&compiled, c, &stats), NOW);
            prop_assert_eq!(fast, reference(&g, c, events), "filter {} contact {:?}", f, c);
        }
    }
}
