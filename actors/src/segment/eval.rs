//! A parsed filter compiled into an evaluator. Compiling resolves what evaluation
//! would otherwise redo for every contact: `data` paths become slots (the caller
//! decodes only those top-level keys), event names become slots, emails and `in`
//! lists are ready to compare, date operands are instants. `matches` is then a walk
//! over a small tree with no parsing and no allocation.

use std::collections::HashSet;

use serde_json::Value;

use super::filter::{
    parse_instant, BoolTest, Cmp, Condition, DataTest, DateTest, EventTest, Filter, Group, GroupOp,
    TextTest,
};
use crate::model::{Contact, EventStats};

/// What an evaluator may ask about one contact. `data` and `event` take the slots of
/// `Compiled::data_keys` and `Compiled::event_names`.
pub trait Subject {
    fn email(&self) -> &str;
    fn subscribed(&self) -> bool;
    fn created_at(&self) -> i64;
    fn updated_at(&self) -> i64;
    /// The top-level `data` value named by `data_keys()[slot]`, if any.
    fn data(&self, slot: usize) -> Option<&Value>;
    /// This contact's statistics of the event named by `event_names()[slot]`.
    fn event(&self, slot: usize) -> Option<EventStats>;
}

#[derive(Debug, Clone)]
pub struct Compiled {
    root: Node,
    data_keys: Vec<String>,
    event_names: Vec<String>,
    conditions: u64,
    tests_email: bool,
    tests_dates: bool,
}

#[derive(Debug, Clone)]
enum Node {
    All(Vec<Node>),
    Any(Vec<Node>),
    Not(Box<Node>),
    Const(bool),
    EmailEq(String),
    EmailContains(String),
    EmailIn(HashSet<String>),
    Subscribed(bool),
    DateEq {
        updated: bool,
        at: i64,
    },
    DateCmp {
        updated: bool,
        cmp: Cmp,
        at: i64,
    },
    DateWithin {
        updated: bool,
        ms: i64,
    },
    DateOlder {
        updated: bool,
        ms: i64,
    },
    Data {
        slot: usize,
        rest: Vec<String>,
        test: DataNode,
    },
    Event {
        slot: usize,
        test: EventNode,
    },
}

#[derive(Debug, Clone)]
enum DataNode {
    Eq(Value),
    Contains(Value),
    Cmp(Cmp, Operand),
    In(InSet),
    Within(i64),
    Older(i64),
    Exists,
}

#[derive(Debug, Clone)]
enum Operand {
    Num(f64),
    /// A string, and its instant when it reads as a date.
    Str(String, Option<i64>),
}

#[derive(Debug, Clone, Copy)]
enum EventNode {
    Triggered,
    Within(i64),
    Older(i64),
}

/// JSON equality, with numbers compared by value (`1` equals `1.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// An `in` list ready for lookups that agree with `json_eq`: a list of 1,000 values
/// walked with `json_eq` cost ~1.5 µs a contact, and a filter may hold many lists.
/// Numbers are keyed by their f64 value, as `json_eq` compares them, so `1` and `1.0`
/// are one key. Arrays and objects, rare in a list, are still compared one by one.
#[derive(Debug, Clone, Default)]
pub struct InSet {
    strings: HashSet<String>,
    numbers: HashSet<u64>,
    bools: [bool; 2],
    null: bool,
    others: Vec<Value>,
}

/// The key of a number: its f64 bits, with -0 counted as 0 (they are equal as f64).
fn number_key(f: f64) -> u64 {
    if f == 0.0 {
        0f64.to_bits()
    } else {
        f.to_bits()
    }
}

impl InSet {
    pub fn new(values: &[Value]) -> Self {
        let mut set = InSet::default();
        for v in values {
            match v {
                Value::String(s) => {
                    set.strings.insert(s.clone());
                }
                Value::Number(n) => match n.as_f64() {
                    Some(f) => {
                        set.numbers.insert(number_key(f));
                    }
                    None => set.others.push(v.clone()),
                },
                Value::Bool(b) => set.bools[usize::from(*b)] = true,
                Value::Null => set.null = true,
                Value::Array(_) | Value::Object(_) => set.others.push(v.clone()),
            }
        }
        set
    }

    /// Whether some value of the list is `json_eq` to `v`.
    pub fn contains(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => self.strings.contains(s.as_str()),
            Value::Number(n) => match n.as_f64() {
                Some(f) => self.numbers.contains(&number_key(f)),
                None => self.others.iter().any(|x| json_eq(v, x)),
            },
            Value::Bool(b) => self.bools[usize::from(*b)],
            Value::Null => self.null,
            Value::Array(_) | Value::Object(_) => self.others.iter().any(|x| json_eq(v, x)),
        }
    }
}

struct Builder {
    data_keys: Vec<String>,
    event_names: Vec<String>,
    conditions: u64,
    tests_email: bool,
    tests_dates: bool,
}

fn slot_of(list: &mut Vec<String>, name: &str) -> usize {
    match list.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            list.push(name.to_owned());
            list.len() - 1
        }
    }
}

fn not(n: Node) -> Node {
    match n {
        Node::Const(b) => Node::Const(!b),
        other => Node::Not(Box::new(other)),
    }
}

impl Builder {
    fn group(&mut self, g: &Group) -> Node {
        let items: Vec<Node> = g
            .items
            .iter()
            .map(|f| match f {
                Filter::Group(g) => self.group(g),
                Filter::Condition(c) => self.condition(c),
            })
            .collect();
        match g.op {
            GroupOp::And => Node::All(items),
            GroupOp::Or => Node::Any(items),
        }
    }

    fn condition(&mut self, c: &Condition) -> Node {
        self.conditions += 1;
        self.tests_email |= matches!(c, Condition::Email(_));
        self.tests_dates |= matches!(c, Condition::Date { .. });
        match c {
            Condition::Email(t) => match t {
                TextTest::Equals(s) => Node::EmailEq(s.clone()),
                TextTest::NotEquals(s) => not(Node::EmailEq(s.clone())),
                TextTest::Contains(s) => Node::EmailContains(s.clone()),
                TextTest::NotContains(s) => not(Node::EmailContains(s.clone())),
                TextTest::In(v) => Node::EmailIn(v.iter().cloned().collect()),
                TextTest::NotIn(v) => not(Node::EmailIn(v.iter().cloned().collect())),
                TextTest::Exists => Node::Const(true),
                TextTest::NotExists => Node::Const(false),
            },
            Condition::Subscribed(t) => match *t {
                BoolTest::Equals(b) => Node::Subscribed(b),
                BoolTest::NotEquals(b) => Node::Subscribed(!b),
                BoolTest::Exists => Node::Const(true),
                BoolTest::NotExists => Node::Const(false),
            },
            Condition::Date { updated, test } => {
                let updated = *updated;
                match *test {
                    DateTest::Equals(at) => Node::DateEq { updated, at },
                    DateTest::NotEquals(at) => not(Node::DateEq { updated, at }),
                    DateTest::Compare(cmp, at) => Node::DateCmp { updated, cmp, at },
                    DateTest::Within(p) => Node::DateWithin {
                        updated,
                        ms: p.millis(),
                    },
                    DateTest::OlderThan(p) => Node::DateOlder {
                        updated,
                        ms: p.millis(),
                    },
                    DateTest::Exists => Node::Const(true),
                    DateTest::NotExists => Node::Const(false),
                }
            }
            Condition::Data { path, test } => {
                let slot = slot_of(&mut self.data_keys, &path[0]);
                let rest = path[1..].to_vec();
                let data = |test| Node::Data {
                    slot,
                    rest: rest.clone(),
                    test,
                };
                match test {
                    DataTest::Equals(v) => data(DataNode::Eq(v.clone())),
                    DataTest::NotEquals(v) => not(data(DataNode::Eq(v.clone()))),
                    DataTest::Contains(v) => data(DataNode::Contains(v.clone())),
                    DataTest::NotContains(v) => not(data(DataNode::Contains(v.clone()))),
                    DataTest::Compare(cmp, v) => {
                        let operand = match v {
                            Value::Number(n) => Operand::Num(n.as_f64().unwrap_or(f64::NAN)),
                            other => {
                                let s = other.as_str().unwrap_or_default().to_owned();
                                let at = parse_instant(&s);
                                Operand::Str(s, at)
                            }
                        };
                        data(DataNode::Cmp(*cmp, operand))
                    }
                    DataTest::In(v) | DataTest::NotIn(v) => {
                        // Arrays and objects in the list are compared one by one (no
                        // set holds them): each costs what a condition does.
                        let compared = v.iter().filter(|x| x.is_array() || x.is_object());
                        self.conditions += compared.count() as u64;
                        let set = data(DataNode::In(InSet::new(v)));
                        match test {
                            DataTest::NotIn(_) => not(set),
                            _ => set,
                        }
                    }
                    DataTest::Within(p) => data(DataNode::Within(p.millis())),
                    DataTest::OlderThan(p) => data(DataNode::Older(p.millis())),
                    DataTest::Exists => data(DataNode::Exists),
                    DataTest::NotExists => not(data(DataNode::Exists)),
                }
            }
            Condition::Event { name, test } => {
                let slot = slot_of(&mut self.event_names, name);
                let event = |test| Node::Event { slot, test };
                match *test {
                    EventTest::Triggered => event(EventNode::Triggered),
                    EventTest::NotTriggered => not(event(EventNode::Triggered)),
                    EventTest::TriggeredWithin(p) => event(EventNode::Within(p.millis())),
                    EventTest::TriggeredOlderThan(p) => event(EventNode::Older(p.millis())),
                }
            }
        }
    }
}

impl Compiled {
    pub fn new(g: &Group) -> Self {
        let mut b = Builder {
            data_keys: Vec::new(),
            event_names: Vec::new(),
            conditions: 0,
            tests_email: false,
            tests_dates: false,
        };
        let root = b.group(g);
        Compiled {
            root,
            data_keys: b.data_keys,
            event_names: b.event_names,
            conditions: b.conditions,
            tests_email: b.tests_email,
            tests_dates: b.tests_dates,
        }
    }

    /// The conditions judged for each contact, at most: the unit of
    /// `limits.max_filter_evaluations` (an empty filter still costs one, the walk).
    pub fn conditions(&self) -> u64 {
        self.conditions.max(1)
    }

    /// A single condition (a workflow CONDITION step) as a one-item AND.
    pub fn condition(c: &Condition) -> Self {
        Compiled::new(&Group {
            op: GroupOp::And,
            items: vec![Filter::Condition(c.clone())],
        })
    }

    /// Whether the filter reads the email (a count from the table's columns cannot).
    pub fn tests_email(&self) -> bool {
        self.tests_email
    }

    /// Whether the filter reads `createdAt` or `updatedAt`.
    pub fn tests_dates(&self) -> bool {
        self.tests_dates
    }

    /// The top-level `data` keys the filter reads; a subject needs only these.
    pub fn data_keys(&self) -> &[String] {
        &self.data_keys
    }

    /// The event names the filter asks about.
    pub fn event_names(&self) -> &[String] {
        &self.event_names
    }

    /// Whether the subject matches at the instant `now` (ms), which relative periods
    /// (`within 7 days`) are measured from.
    pub fn matches<S: Subject + ?Sized>(&self, s: &S, now: i64) -> bool {
        eval(&self.root, s, now)
    }
}

fn eval<S: Subject + ?Sized>(n: &Node, s: &S, now: i64) -> bool {
    match n {
        Node::All(items) => items.iter().all(|i| eval(i, s, now)),
        Node::Any(items) => items.iter().any(|i| eval(i, s, now)),
        Node::Not(inner) => !eval(inner, s, now),
        Node::Const(b) => *b,
        Node::EmailEq(e) => s.email() == e,
        Node::EmailContains(e) => s.email().contains(e.as_str()),
        Node::EmailIn(set) => set.contains(s.email()),
        Node::Subscribed(b) => s.subscribed() == *b,
        Node::DateEq { updated, at } => date(s, *updated) == *at,
        Node::DateCmp { updated, cmp, at } => cmp.holds(date(s, *updated).cmp(at)),
        Node::DateWithin { updated, ms } => date(s, *updated) >= now - ms,
        Node::DateOlder { updated, ms } => date(s, *updated) < now - ms,
        Node::Data { slot, rest, test } => {
            let mut v = s.data(*slot);
            for key in rest {
                v = v.and_then(|v| v.get(key));
            }
            data_test(test, v.filter(|v| !v.is_null()), now)
        }
        Node::Event { slot, test } => {
            let stats = s.event(*slot).filter(|st| st.count > 0);
            match (test, stats) {
                (_, None) => false,
                (EventNode::Triggered, Some(_)) => true,
                (EventNode::Within(ms), Some(st)) => st.last_at >= now - ms,
                (EventNode::Older(ms), Some(st)) => st.last_at < now - ms,
            }
        }
    }
}

fn date<S: Subject + ?Sized>(s: &S, updated: bool) -> i64 {
    if updated {
        s.updated_at()
    } else {
        s.created_at()
    }
}

/// `v` is the value at the path, with a JSON null counted as missing.
fn data_test(test: &DataNode, v: Option<&Value>, now: i64) -> bool {
    let Some(v) = v else {
        return false;
    };
    match test {
        DataNode::Exists => true,
        DataNode::Eq(x) => json_eq(v, x),
        DataNode::Contains(x) => match (v, x) {
            (Value::String(s), Value::String(needle)) => s.contains(needle.as_str()),
            (Value::Array(items), x) => items.iter().any(|i| json_eq(i, x)),
            _ => false,
        },
        DataNode::In(set) => set.contains(v),
        DataNode::Cmp(cmp, operand) => match (v, operand) {
            (Value::Number(n), Operand::Num(x)) => n
                .as_f64()
                .and_then(|n| n.partial_cmp(x))
                .is_some_and(|o| cmp.holds(o)),
            (Value::String(s), Operand::Str(x, at)) => {
                match (at, at.and_then(|_| parse_instant(s))) {
                    (Some(at), Some(t)) => cmp.holds(t.cmp(at)),
                    _ => cmp.holds(s.as_str().cmp(x.as_str())),
                }
            }
            _ => false,
        },
        DataNode::Within(ms) => instant(v).is_some_and(|t| t >= now - ms),
        DataNode::Older(ms) => instant(v).is_some_and(|t| t < now - ms),
    }
}

fn instant(v: &Value) -> Option<i64> {
    v.as_str().and_then(parse_instant)
}

/// A full contact and its event statistics (one per `event_names()` slot), as the
/// write path has them.
pub struct ContactSubject<'a> {
    pub contact: &'a Contact,
    pub data_keys: &'a [String],
    pub events: &'a [Option<EventStats>],
}

impl<'a> ContactSubject<'a> {
    pub fn new(
        compiled: &'a Compiled,
        contact: &'a Contact,
        events: &'a [Option<EventStats>],
    ) -> Self {
        ContactSubject {
            contact,
            data_keys: compiled.data_keys(),
            events,
        }
    }
}

impl Subject for ContactSubject<'_> {
    fn email(&self) -> &str {
        self.contact.email.as_str()
    }
    fn subscribed(&self) -> bool {
        self.contact.subscribed
    }
    fn created_at(&self) -> i64 {
        self.contact.created_at.millis()
    }
    fn updated_at(&self) -> i64 {
        self.contact.updated_at.millis()
    }
    fn data(&self, slot: usize) -> Option<&Value> {
        self.contact.data.get(&self.data_keys[slot])
    }
    fn event(&self, slot: usize) -> Option<EventStats> {
        self.events.get(slot).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContactId, DataMap, EmailAddress, Timestamp};
    use serde_json::json;

    const DAY: i64 = 86_400_000;
    const NOW: i64 = 1_800_000_000_000;

    fn contact(email: &str, subscribed: bool, data: Value, age_days: i64) -> Contact {
        Contact {
            id: ContactId::new(),
            email: EmailAddress::parse(email).unwrap(),
            subscribed,
            data: data.as_object().cloned().unwrap_or_default(),
            created_at: Timestamp::from(NOW - age_days * DAY),
            updated_at: Timestamp::from(NOW - age_days * DAY / 2),
        }
    }

    fn matches(filter: Value, c: &Contact, events: &[(&str, i64)]) -> bool {
        let g = Group::parse(&filter, "filters").unwrap();
        let compiled = Compiled::new(&g);
        let stats: Vec<Option<EventStats>> = compiled
            .event_names()
            .iter()
            .map(|name| {
                let mut st = EventStats::default();
                for (n, at) in events {
                    if n == name {
                        st.add(*at);
                    }
                }
                (st.count > 0).then_some(st)
            })
            .collect();
        compiled.matches(&ContactSubject::new(&compiled, c, &stats), NOW)
    }

    fn one(field: &str, op: &str, value: Value) -> Value {
        json!({"operator": "AND", "conditions": [{"field": field, "operator": op, "value": value}]})
    }

    #[test]
    fn every_operator_on_data_behaves_as_documented() {
        let c = contact(
            "ada@example.com",
            true,
            json!({"plan": "pro", "n": 5, "tags": ["a", "b"], "addr": {"city": "Oslo"},
                   "seen": "2027-01-14T00:00:00Z", "gone": null}),
            3,
        );
        let cases = [
            (one("data.plan", "equals", json!("pro")), true),
            (one("data.n", "equals", json!(5.0)), true),
            (one("data.plan", "notEquals", json!("pro")), false),
            (one("data.missing", "notEquals", json!("pro")), true),
            (one("data.plan", "contains", json!("r")), true),
            (one("data.tags", "contains", json!("b")), true),
            (one("data.tags", "notContains", json!("z")), true),
            (one("data.n", "greaterThan", json!(4)), true),
            (one("data.n", "lessThan", json!(5)), false),
            (one("data.n", "greaterThanOrEqual", json!(5)), true),
            (one("data.n", "lessThanOrEqual", json!(4.5)), false),
            (one("data.plan", "greaterThan", json!("free")), true),
            (one("data.addr.city", "equals", json!("Oslo")), true),
            (one("data.addr.zip", "exists", json!(null)), false),
            (one("data.gone", "exists", json!(null)), false),
            (one("data.gone", "notExists", json!(null)), true),
            (one("data.plan", "in", json!(["free", "pro"])), true),
            (one("data.plan", "notIn", json!(["free", "pro"])), false),
            (one("data.n", "in", json!([1, 5])), true),
            (
                one(
                    "data.seen",
                    "greaterThan",
                    json!("2027-01-13T23:00:00-02:00"),
                ),
                false,
            ),
        ];
        for (filter, expected) in cases {
            assert_eq!(matches(filter.clone(), &c, &[]), expected, "{filter}");
        }
    }

    #[test]
    fn relative_dates_and_events_are_measured_from_now() {
        let c = contact(
            "a@x.io",
            false,
            json!({"seen": Timestamp::from(NOW - 2 * DAY).to_iso()}),
            10,
        );
        let within = |f: &str, n: i64, unit: &str| json!({"operator": "AND", "conditions": [{"field": f, "operator": "within", "value": n, "unit": unit}]});
        assert!(!matches(within("createdAt", 9, "days"), &c, &[]));
        assert!(matches(within("createdAt", 11, "days"), &c, &[]));
        assert!(matches(within("updatedAt", 6 * 24, "hours"), &c, &[]));
        assert!(matches(
            within("data.seen", 3 * 24 * 60, "minutes"),
            &c,
            &[]
        ));
        let older = json!({"operator": "AND", "conditions": [{"field": "createdAt", "operator": "olderThan", "value": 9}]});
        assert!(matches(older, &c, &[]), "the unit defaults to days");

        let ev = |op: &str| json!({"operator": "AND", "conditions": [{"field": "event.buy", "operator": op, "value": 1, "unit": "days"}]});
        let bought_2d_ago = [("buy", NOW - 2 * DAY)];
        assert!(matches(ev("triggered"), &c, &bought_2d_ago));
        assert!(!matches(ev("notTriggered"), &c, &bought_2d_ago));
        assert!(matches(ev("notTriggered"), &c, &[("other", NOW)]));
        assert!(!matches(ev("triggeredWithin"), &c, &bought_2d_ago));
        assert!(matches(ev("triggeredOlderThan"), &c, &bought_2d_ago));
        assert!(
            !matches(ev("triggeredOlderThan"), &c, &[]),
            "never triggered is not 'older than'"
        );
    }

    #[test]
    fn nested_or_inside_and() {
        let f = json!({"operator": "AND", "conditions": [
            {"field": "subscribed", "operator": "equals", "value": true},
            {"operator": "OR", "conditions": [
                {"field": "email", "operator": "contains", "value": "@ACME.com"},
                {"field": "data.vip", "operator": "equals", "value": true}
            ]}
        ]});
        assert!(matches(
            f.clone(),
            &contact("a@acme.com", true, json!({}), 1),
            &[]
        ));
        assert!(matches(
            f.clone(),
            &contact("a@b.com", true, json!({"vip": true}), 1),
            &[]
        ));
        assert!(!matches(
            f.clone(),
            &contact("a@b.com", true, json!({}), 1),
            &[]
        ));
        assert!(!matches(
            f,
            &contact("a@acme.com", false, json!({}), 1),
            &[]
        ));
    }

    #[test]
    fn empty_groups_match_all_for_and_none_for_or() {
        let c = contact("a@b.io", true, json!({}), 1);
        assert!(matches(
            json!({"operator": "AND", "conditions": []}),
            &c,
            &[]
        ));
        assert!(!matches(
            json!({"operator": "OR", "conditions": []}),
            &c,
            &[]
        ));
    }

    #[test]
    fn an_in_set_agrees_with_json_eq_on_mixed_numbers_and_strings() {
        let list = [
            json!(1),
            json!(2.5),
            json!("3"),
            json!(-0.0),
            json!(u64::MAX),
            json!(false),
            json!([1, "a"]),
            json!({"a": 1}),
        ];
        let set = InSet::new(&list);
        let probes = [
            json!(1.0),
            json!(1),
            json!("1"),
            json!(3),
            json!("3"),
            json!(0),
            json!(0.0),
            json!(2.5),
            json!(2),
            json!(u64::MAX as f64),
            json!(false),
            json!(true),
            json!([1, "a"]),
            json!([1.0, "a"]),
            json!({"a": 1}),
            json!(null),
        ];
        for v in probes {
            let by_list = list.iter().any(|x| json_eq(&v, x));
            assert_eq!(set.contains(&v), by_list, "{v}");
        }
        let c = contact("a@b.io", true, json!({"n": 5, "s": "5", "f": 2.0}), 1);
        for (filter, expected) in [
            (one("data.n", "in", json!(["5", 5.0])), true),
            (one("data.s", "in", json!([5, 6])), false),
            (one("data.s", "notIn", json!([5, "6"])), true),
            (one("data.f", "in", json!(["2", 2])), true),
            (one("data.f", "notIn", json!([2.0])), false),
        ] {
            assert_eq!(matches(filter.clone(), &c, &[]), expected, "{filter}");
        }
    }

    /// Eight `notIn` lists of 1,000 values (numbers and strings), none of which holds the
    /// contact's value, so every list is consulted for every contact.
    /// `cargo test -p mailroom-actors eight_not_in -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement: cargo test -p mailroom-actors eight_not_in -- --ignored --nocapture"]
    fn eight_not_in_lists_of_a_thousand_values_cost_per_contact() {
        let list: Vec<Value> = (0..1000)
            .map(|n| {
                if n % 2 == 0 {
                    json!(n)
                } else {
                    json!(format!("v{n}"))
                }
            })
            .collect();
        let conditions: Vec<Value> = (0..8)
            .map(|i| json!({"field": format!("data.k{i}"), "operator": "notIn", "value": list}))
            .collect();
        let g = Group::parse(
            &json!({"operator": "AND", "conditions": conditions}),
            "filters",
        )
        .unwrap();
        let compiled = Compiled::new(&g);
        let contacts: Vec<Contact> = (0..2_000)
            .map(|i| {
                let data = json!({"k0": 5_001 + i, "k1": format!("w{i}"), "k2": 1.5, "k3": "x",
                    "k4": 7_001, "k5": format!("v{}", 2 * i), "k6": true, "k7": -3});
                contact(&format!("c{i}@x.io"), true, data, 1)
            })
            .collect();
        let rounds = 10;
        let started = std::time::Instant::now();
        let mut matched = 0usize;
        for _ in 0..rounds {
            for c in &contacts {
                matched +=
                    usize::from(compiled.matches(&ContactSubject::new(&compiled, c, &[]), NOW));
            }
        }
        let per_contact = started.elapsed() / (rounds * contacts.len() as u32);
        assert_eq!(matched, rounds as usize * contacts.len());
        eprintln!("eight notIn lists of 1,000 values: {per_contact:?} per contact");
    }

    #[test]
    fn compiling_collects_only_the_top_level_data_keys_once() {
        let g = Group::parse(
            &json!({"operator": "OR", "conditions": [
                {"field": "data.a.b", "operator": "exists"},
                {"field": "data.a.c", "operator": "exists"},
                {"field": "data.d", "operator": "exists"},
                {"field": "event.x", "operator": "triggered"}
            ]}),
            "filters",
        )
        .unwrap();
        let c = Compiled::new(&g);
        assert_eq!(c.data_keys(), ["a", "d"]);
        assert_eq!(c.event_names(), ["x"]);
        let _ = DataMap::new();
    }
}
