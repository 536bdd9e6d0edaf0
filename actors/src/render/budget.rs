//! A bound on the work of one render, worked out before it starts.
//!
//! tera cannot be stopped once it renders, so nothing is started that could run long:
//! the template's syntax tree is walked once with the recipient's real variables, and
//! each construct is charged its worst case. A loop costs its body times the length of
//! what it iterates (read from the data when it can be, else bounded by the size of the
//! value it comes from); a value's size is bounded through every filter and concatenation
//! (`escape` may make it six times larger, `replace` as large as its input times its
//! replacement). The walk itself visits each node once, whatever the loops multiply.
//!
//! A render goes ahead only when the charged steps and the largest value or output are
//! within `Limits`; the charge is an upper bound, so a render that goes ahead cannot do
//! more. With `set`, macros and includes refused by the sandbox, the only names a
//! template binds are loop variables, so this walk sees every value a render can make.

use serde_json::Value;
use tera::ast::{Expr, ExprVal, FunctionCall, Node};

use super::Limits;

/// The worst case of one value: its size in bytes (as text or JSON), how many items a
/// loop over it could take, and whether it may be a string (a loop over a string finds
/// its i-th item by walking to it, at every use of the loop variable).
#[derive(Clone, Copy, Debug)]
struct Abs {
    size: u64,
    len: u64,
    text: bool,
}

impl Abs {
    fn scalar(size: u64) -> Abs {
        Abs {
            size,
            len: 0,
            text: false,
        }
    }

    fn sized(size: u64, len: u64) -> Abs {
        Abs {
            size,
            len,
            text: true,
        }
    }

    fn list(size: u64, len: u64) -> Abs {
        Abs {
            size,
            len,
            text: false,
        }
    }

    /// A value known only by the size of what it came from (a part of a loop item).
    fn part_of(whole: Abs) -> Abs {
        Abs::sized(whole.size, whole.size)
    }

    fn of(v: &Value) -> Abs {
        let len = match v {
            Value::Array(a) => a.len() as u64,
            Value::Object(o) => o.len() as u64,
            Value::String(s) => s.len() as u64,
            _ => 0,
        };
        Abs {
            size: json_size(v),
            len,
            text: v.is_string(),
        }
    }
}

/// The worst case that a render was charged: steps and the largest text it may hold.
#[derive(Debug, PartialEq, Eq)]
pub struct Charge {
    pub steps: u64,
    pub bytes: u64,
}

/// What went over, for the 422.
#[derive(Debug)]
pub struct OverBudget(pub String);

/// Charges one render of `nodes` with `vars`; `escaped` when output is HTML-escaped.
pub fn charge(
    nodes: &[Node],
    vars: &Value,
    escaped: bool,
    limits: &Limits,
) -> Result<Charge, OverBudget> {
    let mut walk = Walk {
        vars,
        scopes: Vec::new(),
        steps: 0,
        largest: 0,
        escaped,
    };
    let out = walk.nodes(nodes, 1);
    let bytes = out.max(walk.largest);
    if bytes > limits.max_output_bytes {
        return Err(OverBudget(format!(
            "rendering could make {bytes} bytes with this data; the limit is {}",
            limits.max_output_bytes
        )));
    }
    if walk.steps > limits.max_steps {
        return Err(OverBudget(format!(
            "rendering could take {} steps with this data; the limit is {} (loops multiply: \
             a loop runs its body once per item)",
            walk.steps, limits.max_steps
        )));
    }
    Ok(Charge {
        steps: walk.steps,
        bytes,
    })
}

/// A loop variable in scope: its worst case, and what one use of it costs.
struct Scope {
    name: String,
    value: Abs,
    per_use: u64,
}

struct Walk<'a> {
    vars: &'a Value,
    /// Loop variables in scope, innermost last.
    scopes: Vec<Scope>,
    steps: u64,
    largest: u64,
    escaped: bool,
}

impl Walk<'_> {
    fn charge(&mut self, times: u64, work: u64) {
        self.steps = self.steps.saturating_add(times.saturating_mul(work));
    }

    fn seen(&mut self, a: Abs) -> Abs {
        self.largest = self.largest.max(a.size);
        a
    }

    /// Output bytes of `nodes` run `times` times (and charges their steps).
    fn nodes(&mut self, nodes: &[Node], times: u64) -> u64 {
        nodes
            .iter()
            .fold(0u64, |out, n| out.saturating_add(self.node(n, times)))
    }

    fn node(&mut self, node: &Node, times: u64) -> u64 {
        self.charge(times, 1);
        match node {
            Node::Text(s) | Node::Raw(_, s, _) => times.saturating_mul(s.len() as u64),
            Node::VariableBlock(_, e) => {
                let v = self.expr(e, times);
                let factor = if self.escaped && !e.is_marked_safe() {
                    6
                } else {
                    1
                };
                times.saturating_mul(v.size.saturating_mul(factor))
            }
            Node::If(i, _) => {
                let mut out = 0u64;
                for (_, cond, body) in &i.conditions {
                    self.expr(cond, times);
                    out = out.max(self.nodes(body, times));
                }
                if let Some((_, body)) = &i.otherwise {
                    out = out.max(self.nodes(body, times));
                }
                out
            }
            Node::Forloop(_, f, _) => {
                let container = self.expr(&f.container, times);
                let n = container.len;
                // Setting a loop up copies an object's keys.
                self.charge(times, container.size / 64);
                let item = Abs::part_of(container);
                let per_use = if container.text { n } else { 0 };
                let names = std::iter::once(&f.value).chain(f.key.as_ref());
                let pushed = names.clone().count();
                for name in names {
                    self.scopes.push(Scope {
                        name: name.clone(),
                        value: item,
                        per_use,
                    });
                }
                let inner = times.saturating_mul(n.max(1));
                let body = self.nodes(&f.body, inner);
                self.scopes.truncate(self.scopes.len() - pushed);
                let empty = f.empty_body.as_ref().map_or(0, |b| self.nodes(b, times));
                body.max(empty)
            }
            Node::FilterSection(_, s, _) => {
                let body = self.nodes(&s.body, times);
                self.filter(&s.filter, Abs::sized(body, body), times).size
            }
            // Refused by the sandbox before any render; nothing to charge.
            _ => 0,
        }
    }

    fn expr(&mut self, e: &Expr, times: u64) -> Abs {
        let mut v = self.val(&e.val, times);
        for f in &e.filters {
            v = self.filter(f, v, times);
        }
        if e.negated {
            v = Abs::scalar(5);
        }
        self.seen(v)
    }

    fn val(&mut self, v: &ExprVal, times: u64) -> Abs {
        self.charge(times, 1);
        match v {
            ExprVal::String(s) => Abs::sized(s.len() as u64, s.len() as u64),
            ExprVal::Int(_) | ExprVal::Float(_) => Abs::scalar(24),
            ExprVal::Bool(_) => Abs::scalar(5),
            ExprVal::Ident(path) => self.ident(path, times),
            ExprVal::Math(m) => {
                self.expr(&m.lhs, times);
                self.expr(&m.rhs, times);
                Abs::scalar(24)
            }
            ExprVal::Logic(l) => {
                self.expr(&l.lhs, times);
                self.expr(&l.rhs, times);
                Abs::scalar(5)
            }
            ExprVal::In(i) => {
                self.expr(&i.lhs, times);
                let hay = self.expr(&i.rhs, times);
                self.charge(times, hay.size / 64);
                Abs::scalar(5)
            }
            ExprVal::Test(t) => {
                for a in &t.args {
                    // Arguments are copied at each evaluation.
                    let arg = self.expr(a, times);
                    self.charge(times, arg.size / 64);
                }
                let subject = self.ident(&t.ident, times);
                self.charge(times, subject.size / 64);
                Abs::scalar(5)
            }
            ExprVal::FunctionCall(call) => self.function(call, times),
            ExprVal::Array(items) => items.iter().fold(Abs::list(0, 0), |acc, e| {
                let a = self.expr(e, times);
                Abs::list(
                    acc.size.saturating_add(a.size).saturating_add(1),
                    acc.len + 1,
                )
            }),
            ExprVal::StringConcat(c) => {
                let size = c.values.iter().fold(0u64, |acc, v| {
                    let a = self.val(v, times);
                    acc.saturating_add(a.size)
                });
                self.charge(times, size / 64);
                Abs::sized(size, size)
            }
            ExprVal::MacroCall(_) => Abs::scalar(0),
        }
    }

    /// `range` is the only function the sandbox keeps.
    fn function(&mut self, call: &FunctionCall, times: u64) -> Abs {
        let mut arg = |name: &str, default: u64| -> Option<u64> {
            match call.args.get(name) {
                None => Some(default),
                Some(e) => match &e.val {
                    ExprVal::Int(i) if e.filters.is_empty() => u64::try_from(*i).ok(),
                    ExprVal::Ident(path) if e.filters.is_empty() => {
                        self.lookup(path).and_then(Value::as_u64).or(Some(u64::MAX))
                    }
                    _ => {
                        self.expr(e, times);
                        None
                    }
                },
            }
        };
        let (start, end, step) = (arg("start", 0), arg("end", 0), arg("step_by", 1));
        let len = match (start, end, step) {
            (Some(s), Some(e), Some(st)) if st > 0 => e.saturating_sub(s).div_ceil(st),
            // Unknown bounds: the capped `range` itself allows up to the step limit.
            _ => u64::MAX,
        };
        self.charge(times, len / 8);
        Abs::list(len.saturating_mul(24), len)
    }

    fn filter(&mut self, f: &FunctionCall, input: Abs, times: u64) -> Abs {
        let mut args = Vec::with_capacity(f.args.len());
        let mut copied = 0u64;
        for (name, e) in &f.args {
            let a = self.expr(e, times);
            copied = copied.saturating_add(a.size);
            args.push((name.as_str(), a));
        }
        let arg = |name: &str| {
            args.iter()
                .find(|(n, _)| *n == name)
                .map_or(Abs::scalar(0), |(_, a)| *a)
        };
        let given = |name: &str| f.args.contains_key(name);
        // The input is read and every argument copied, at each evaluation.
        self.charge(times, 1 + input.size.saturating_add(copied) / 64);
        let scaled = |k: u64| Abs {
            size: input.size.saturating_mul(k),
            len: input.len.saturating_mul(k),
            text: input.text,
        };
        let out = match f.name.as_str() {
            // Case mapping can turn one byte into up to three; escaping one into six.
            "upper" | "lower" | "title" | "capitalize" => scaled(3),
            "escape" | "escape_xml" | "json_encode" => scaled(6),
            "addslashes" => scaled(2),
            "linebreaksbr" => scaled(5),
            "replace" => {
                // Every match, up to one per character boundary (`from=""` matches at
                // each), becomes `to`.
                let to = arg("to").size;
                let size = input
                    .size
                    .saturating_add(input.size.saturating_add(1).saturating_mul(to));
                Abs::sized(size, size)
            }
            "truncate" => {
                let end = if given("end") { arg("end").size } else { 3 };
                let size = input.size.saturating_add(end);
                Abs::sized(size, size)
            }
            "get" => {
                let d = arg("default");
                Abs::sized(input.size.max(d.size), input.len.max(d.len))
            }
            "join" => {
                let sep = arg("sep").size;
                let size = input.size.saturating_add(input.len.saturating_mul(sep));
                Abs::sized(size, size)
            }
            "indent" => {
                let prefix = if given("prefix") {
                    arg("prefix").size
                } else {
                    4
                };
                scaled(1 + prefix)
            }
            "split" => Abs::list(input.size.saturating_mul(2), input.size.saturating_add(1)),
            "concat" => {
                let with = arg("with");
                Abs::list(
                    input.size.saturating_add(with.size),
                    input.len.saturating_add(with.len.max(1)),
                )
            }
            "group_by" => scaled(2),
            "sort" | "unique" => {
                let n = input.len.max(1);
                self.charge(times, n.saturating_mul(64 - n.leading_zeros() as u64) / 8);
                input
            }
            "default" => {
                let d = arg("value");
                Abs::sized(input.size.max(d.size), input.len.max(d.len))
            }
            "pluralize" => Abs::scalar(arg("singular").size.max(arg("plural").size).max(1)),
            "int" | "float" | "abs" | "round" | "length" | "wordcount" => Abs::scalar(24),
            // The rest keep or shrink their input.
            _ => input,
        };
        self.seen(out)
    }

    fn ident(&mut self, path: &str, times: u64) -> Abs {
        let root = root_of(path);
        if let Some(scope) = self.scopes.iter().rev().find(|s| s.name == root) {
            let (value, per_use) = (scope.value, scope.per_use);
            self.charge(times, per_use);
            return value;
        }
        // Inside a loop, `loop.index` and friends are numbers; anything else named
        // `loop` is looked up in the variables, as tera does.
        if !self.scopes.is_empty()
            && matches!(
                path,
                "loop.index" | "loop.index0" | "loop.first" | "loop.last"
            )
        {
            return Abs::scalar(24);
        }
        match self.lookup_deepest(path) {
            Some(v) => Abs::of(v),
            None => Abs::scalar(0),
        }
    }

    /// The value at a dotted path of the variables, when the path is plain and resolves.
    fn lookup(&self, path: &str) -> Option<&Value> {
        if path.contains('[') || self.scopes.iter().any(|s| s.name == root_of(path)) {
            return None;
        }
        path.split('.').try_fold(self.vars, step)
    }

    /// The deepest value that a path's plain prefix reaches: a bound for the whole path
    /// (a part is never larger than what holds it). A missing variable is None.
    fn lookup_deepest(&self, path: &str) -> Option<&Value> {
        let plain = path.split('[').next().unwrap_or_default();
        let mut at = self.vars;
        let mut parts = plain.split('.').filter(|p| !p.is_empty()).peekable();
        let first = parts.next()?;
        at = step(at, first)?;
        for part in parts {
            match step(at, part) {
                Some(next) => at = next,
                // An index or key we cannot follow: the holder bounds it.
                None if path.contains('[') => return Some(at),
                None => return None,
            }
        }
        Some(at)
    }
}

fn step<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(o) => o.get(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    }
}

fn root_of(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or_default()
}

/// The length of `v` as compact JSON, without writing it out.
pub fn json_size(v: &Value) -> u64 {
    match v {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(a) => a.iter().map(json_size).sum::<u64>() + a.len() as u64 + 1,
        Value::Object(o) => {
            o.iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
                .sum::<u64>()
                + 1
        }
    }
}
