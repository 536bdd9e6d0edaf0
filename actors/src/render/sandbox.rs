//! The template sandbox: what tenant text may use of tera.
//!
//! Tenant templates are hostile input (ARCHITECTURE rule 9). Three walls keep them in:
//! - an engine with nothing outside the template: tera's functions are dropped but for a
//!   capped `range` (no `get_env`, `now`, `get_random`, `throw`), and only filters and
//!   tests that compute on their input are kept;
//! - an allowlist of statements (`check`): text, output, `if`, `for`, `break`, `continue`,
//!   `raw`, comments and filter sections. `include`, `extends`, `import`, macros, blocks
//!   and `set` are refused at save: the first three reach other templates (a body that
//!   includes itself recursed until the process aborted), and macros and `set` are the
//!   ways a template could grow values without bound (`{% set a = a ~ a %}` forty times);
//! - a pre-scan (`prescan`) of the raw text that bounds nesting and the length of one
//!   expression, since tera's parser, renderer and even the drop of its syntax tree recurse
//!   once per level: `{{ 1+1+1+... }}` with a million terms would overflow the stack.
//!
//! The work of one render is bounded separately, before it starts (`budget`).

use std::collections::HashMap;

use serde_json::Value;
use tera::ast::{Expr, ExprVal, FunctionCall, Node};
use tera::Tera;

use super::Limits;

/// Filters whose output size is a known function of their input (see `budget`).
pub const FILTERS: &[&str] = &[
    "upper",
    "lower",
    "trim",
    "trim_start",
    "trim_end",
    "trim_start_matches",
    "trim_end_matches",
    "truncate",
    "wordcount",
    "replace",
    "capitalize",
    "title",
    "linebreaksbr",
    "indent",
    "striptags",
    "spaceless",
    "escape",
    "escape_xml",
    "addslashes",
    "split",
    "int",
    "float",
    "first",
    "last",
    "nth",
    "join",
    "sort",
    "unique",
    "slice",
    "group_by",
    "filter",
    "map",
    "concat",
    "abs",
    "pluralize",
    "round",
    "length",
    "reverse",
    "json_encode",
    "as_str",
    "get",
    "default",
    "safe",
];

/// Tests (`is defined`, `is odd`, ...) that only look at their value.
const TESTS: &[&str] = &[
    "defined",
    "undefined",
    "odd",
    "even",
    "string",
    "number",
    "divisibleby",
    "iterable",
    "object",
    "starting_with",
    "ending_with",
    "containing",
];

/// A tera engine holding nothing but the allowed filters, tests and a capped `range`.
pub fn engine(limits: &Limits) -> Tera {
    let mut tera = Tera::default();
    tera.autoescape_on(vec![".html"]);
    tera.functions.clear();
    tera.filters
        .retain(|name, _| FILTERS.contains(&name.as_str()));
    tera.testers
        .retain(|name, _| TESTS.contains(&name.as_str()));
    let cap = limits.max_steps;
    tera.register_function("range", move |args: &HashMap<String, Value>| {
        capped_range(args, cap)
    });
    // tera's `int` panics on a base outside 2..=36 (`from_str_radix`).
    if let Some(int) = tera.filters.get("int").cloned() {
        tera.register_filter(
            "int",
            move |v: &Value, args: &HashMap<String, Value>| match args
                .get("base")
                .map(|b| b.as_u64())
            {
                None | Some(Some(2..=36)) => int.filter(v, args),
                Some(_) => Err(tera::Error::msg("int: `base` must be 2 to 36")),
            },
        );
    }
    tera
}

/// tera's `range(end, start=0, step_by=1)`, refusing more than `cap` numbers before it
/// allocates them (tera's own would build a vector of any length it is asked for).
fn capped_range(args: &HashMap<String, Value>, cap: u64) -> tera::Result<Value> {
    let arg = |name: &str, default: Option<u64>| -> tera::Result<u64> {
        match args.get(name) {
            Some(v) => v.as_u64().ok_or_else(|| {
                tera::Error::msg(format!(
                    "range: `{name}` must be a non-negative integer, not {v}"
                ))
            }),
            None => default.ok_or_else(|| tera::Error::msg(format!("range: `{name}` is required"))),
        }
    };
    let (start, end, step) = (
        arg("start", Some(0))?,
        arg("end", None)?,
        arg("step_by", Some(1))?,
    );
    if step == 0 {
        return Err(tera::Error::msg("range: `step_by` must be at least 1"));
    }
    let count = end.saturating_sub(start).div_ceil(step);
    if count > cap {
        return Err(tera::Error::msg(format!(
            "range: {count} numbers is more than the {cap} a template may make"
        )));
    }
    Ok(Value::Array(
        (start..end)
            .step_by(step as usize)
            .map(Value::from)
            .collect(),
    ))
}

/// A statement or call that tenant text may not use, with the tag keyword that finds it
/// in the source for the error's line.
pub struct Refusal {
    pub what: String,
    pub keyword: &'static str,
    /// The filter, function or test refused, which finds the line when no tag keyword does.
    pub name: Option<String>,
}

/// Walks a parsed template and names the first construct outside the allowlist.
pub fn check(nodes: &[Node]) -> Result<(), Refusal> {
    for node in nodes {
        check_node(node)?;
    }
    Ok(())
}

fn refuse(what: &str, keyword: &'static str) -> Result<(), Refusal> {
    Err(Refusal {
        what: what.to_owned(),
        keyword,
        name: None,
    })
}

fn check_node(node: &Node) -> Result<(), Refusal> {
    match node {
        Node::Text(_) | Node::Raw(..) | Node::Comment(..) | Node::Break(_) | Node::Continue(_) => {
            Ok(())
        }
        Node::VariableBlock(_, e) => check_expr(e),
        Node::If(i, _) => {
            for (_, cond, body) in &i.conditions {
                check_expr(cond)?;
                check(body)?;
            }
            match &i.otherwise {
                Some((_, body)) => check(body),
                None => Ok(()),
            }
        }
        Node::Forloop(_, f, _) => {
            check_expr(&f.container)?;
            check(&f.body)?;
            match &f.empty_body {
                Some(body) => check(body),
                None => Ok(()),
            }
        }
        Node::FilterSection(_, s, _) => {
            check_call(&s.filter, true)?;
            check(&s.body)
        }
        Node::Include(..) => refuse("`include` is not available in templates", "include"),
        Node::Extends(..) => refuse("`extends` is not available in templates", "extends"),
        Node::ImportMacro(..) => refuse("`import` is not available in templates", "import"),
        Node::MacroDefinition(..) => refuse("macros are not available in templates", "macro"),
        Node::Block(..) | Node::Super => refuse("blocks are not available in templates", "block"),
        Node::Set(_, s) if s.global => {
            refuse("`set_global` is not available in templates", "set_global")
        }
        Node::Set(..) => refuse(
            "`set` is not available in templates; use the value where it is needed",
            "set",
        ),
    }
}

fn check_call(call: &FunctionCall, filter: bool) -> Result<(), Refusal> {
    if filter && call.name == "json_encode" && call.args.contains_key("pretty") {
        // Pretty printing indents by depth, which the work bound does not model.
        return Err(Refusal {
            what: "json_encode takes no `pretty` in templates".into(),
            keyword: "",
            name: Some("pretty".into()),
        });
    }
    if filter && !FILTERS.contains(&call.name.as_str()) {
        return Err(Refusal {
            what: format!("the filter `{}` is not available in templates", call.name),
            keyword: "",
            name: Some(call.name.clone()),
        });
    }
    if !filter && call.name != "range" {
        return Err(Refusal {
            what: format!(
                "the function `{}` is not available in templates (only `range` is)",
                call.name
            ),
            keyword: "",
            name: Some(call.name.clone()),
        });
    }
    for arg in call.args.values() {
        check_expr(arg)?;
    }
    Ok(())
}

fn check_expr(e: &Expr) -> Result<(), Refusal> {
    for f in &e.filters {
        check_call(f, true)?;
    }
    check_val(&e.val)
}

fn check_val(v: &ExprVal) -> Result<(), Refusal> {
    match v {
        ExprVal::String(_) | ExprVal::Int(_) | ExprVal::Float(_) | ExprVal::Bool(_) => Ok(()),
        ExprVal::Ident(path) => check_ident(path),
        ExprVal::Math(m) => {
            check_expr(&m.lhs)?;
            check_expr(&m.rhs)
        }
        ExprVal::Logic(l) => {
            check_expr(&l.lhs)?;
            check_expr(&l.rhs)
        }
        ExprVal::In(i) => {
            check_expr(&i.lhs)?;
            check_expr(&i.rhs)
        }
        ExprVal::Test(t) => {
            check_ident(&t.ident)?;
            if !TESTS.contains(&t.name.as_str()) {
                return Err(Refusal {
                    what: format!("the test `{}` is not available in templates", t.name),
                    keyword: "",
                    name: Some(t.name.clone()),
                });
            }
            t.args.iter().try_for_each(check_expr)
        }
        ExprVal::MacroCall(_) => refuse("macros are not available in templates", "macro"),
        ExprVal::FunctionCall(call) => check_call(call, false),
        ExprVal::Array(items) => items.iter().try_for_each(check_expr),
        ExprVal::StringConcat(c) => c.values.iter().try_for_each(check_val),
    }
}

/// `__tera_context` is the whole context as pretty JSON, built anew at each mention:
/// a copy per use that the work bound cannot price, and nothing a template needs.
fn check_ident(path: &str) -> Result<(), Refusal> {
    if path.contains("__tera_context") {
        return Err(Refusal {
            what: "`__tera_context` is not available in templates".into(),
            keyword: "",
            name: Some("__tera_context".into()),
        });
    }
    Ok(())
}

/// The 1-based line of the first tag that opens with `keyword`, for an error message.
pub fn line_of_tag(src: &str, keyword: &str) -> Option<usize> {
    if keyword.is_empty() {
        return None;
    }
    let mut offset = 0;
    while let Some(at) = src[offset..].find("{%") {
        let start = offset + at;
        if first_word(&src[start + 2..]) == keyword {
            return Some(line_at(src, start));
        }
        offset = start + 2;
    }
    None
}

/// Why a template's raw text is refused before it is parsed, and on which line.
pub struct TooDeep {
    pub line: usize,
    pub what: String,
}

/// Bounds, on the raw text, what would make tera's parser slow or make it, its renderer
/// or the drop of its syntax tree recurse deeply:
/// - block nesting (`if`, `for`, `filter`, ...) and bracket nesting, each level of which
///   is a level of recursion;
/// - operators, filters and `[` lookups in one tag, each of which nests the tree once
///   more (and each `[x]` copies the whole path again at render);
/// - calls nested in calls: tera's grammar tries four alternatives at each level and
///   pest keeps no memo, so each level of `f(a=f(a=...))` costs four times the one inside
///   it (measured, release build: 4 levels 0.9 ms, 8 levels 217 ms);
/// - the parse as a whole: each tag costs 4^(its call depth) units (about 4 µs each,
///   measured on 1 MiB templates), and a template may spend `max_parse_units`.
///
/// An unclosed tag, comment, string or `raw` block is refused here too, rather than left
/// for the scanner and tera to read differently.
pub fn prescan(src: &str, limits: &Limits) -> Result<(), TooDeep> {
    let bytes = src.as_bytes();
    let mut depth = 0usize;
    let mut units = 0u64;
    let mut i = 0;
    let refuse = |pos: usize, what: String| {
        Err(TooDeep {
            line: line_at(src, pos),
            what,
        })
    };
    while i + 1 < bytes.len() {
        let open = &bytes[i..i + 2];
        let close: &[u8] = match open {
            b"{{" => b"}}",
            b"{%" => b"%}",
            b"{#" => {
                // A comment ends at `#}`; nothing inside it is parsed.
                match src[i + 2..].find("#}") {
                    Some(at) => i = i + 2 + at + 2,
                    None => return refuse(i, "a comment is not closed with #}".into()),
                }
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let start = i;
        let Some(tag) = scan_tag(bytes, i + 2, close) else {
            let (open, close) = if open == b"{{" {
                ("{{", "}}")
            } else {
                ("{%", "%}")
            };
            return refuse(
                start,
                format!("`{open}` is never closed with `{close}`, or a string in it is not closed"),
            );
        };
        if tag.brackets > limits.max_nesting {
            return refuse(
                start,
                format!(
                    "brackets nest {} deep; at most {} are allowed",
                    tag.brackets, limits.max_nesting
                ),
            );
        }
        if tag.calls > MAX_CALL_DEPTH {
            return refuse(
                start,
                format!(
                    "calls nest {} deep (a function or filter call inside another's \
                     arguments); at most {MAX_CALL_DEPTH} are allowed",
                    tag.calls
                ),
            );
        }
        if tag.operators > limits.max_operators {
            return refuse(
                start,
                format!(
                    "one expression has {} operators, filters and lookups; at most {} are allowed",
                    tag.operators, limits.max_operators
                ),
            );
        }
        units += 4u64.pow(tag.calls as u32) + tag.operators as u64;
        if units > limits.max_parse_units {
            return refuse(
                start,
                format!(
                    "the template has too many expressions to parse (over {} units; a tag \
                     costs 4 to the power of its call nesting)",
                    limits.max_parse_units
                ),
            );
        }
        let mut end = tag.end;
        if open == b"{%" {
            match tag_word(src, start, end) {
                "if" | "for" | "filter" | "macro" | "block" => depth += 1,
                "raw" => {
                    // Text up to the `endraw` tag is literal, however it looks.
                    match find_endraw(src, end) {
                        Some(after) => end = after,
                        None => {
                            return refuse(
                                start,
                                "`{% raw %}` is never closed; add `{% endraw %}`".into(),
                            )
                        }
                    }
                }
                w if w.starts_with("end") => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > limits.max_nesting {
                return refuse(
                    start,
                    format!("blocks nest more than {} deep", limits.max_nesting),
                );
            }
        }
        i = end;
    }
    Ok(())
}

/// Calls nested in one another's arguments that one tag may have.
pub const MAX_CALL_DEPTH: usize = 3;

/// The first word of the tag that opens at `start` and ends before `end`.
fn tag_word(src: &str, start: usize, end: usize) -> &str {
    first_word(&src[start + 2..end.saturating_sub(2).max(start + 2)])
}

/// The first word of a tag's inside (after `{%` and its `-`): `for`, `endraw`, ...
pub(super) fn first_word(inside: &str) -> &str {
    inside
        .trim_start_matches('-')
        .trim_start()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or_default()
}

/// The 1-based line of byte `pos` of `src`.
fn line_at(src: &str, pos: usize) -> usize {
    src[..pos].matches('\n').count() + 1
}

/// Where the `{% endraw %}` tag (with optional `-` whitespace controls) after `from`
/// ends, as tera's grammar reads it: the word `endraw` in text does not end the block.
pub(super) fn find_endraw(src: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(found) = src[at..].find("{%") {
        let open = at + found;
        let rest = src[open + 2..]
            .strip_prefix('-')
            .unwrap_or(&src[open + 2..]);
        if let Some(rest) = rest.trim_start().strip_prefix("endraw") {
            let rest = rest.trim_start();
            let rest = rest.strip_prefix('-').unwrap_or(rest);
            if rest.starts_with("%}") {
                return Some(src.len() - rest.len() + 2);
            }
        }
        at = open + 2;
    }
    None
}

/// What one tag holds, as the prescan counts it.
struct Tag {
    end: usize,
    brackets: usize,
    calls: usize,
    operators: usize,
}

/// Scans one tag from `from` to its closing delimiter (outside string literals); None
/// when the tag or a string in it never closes.
fn scan_tag(bytes: &[u8], from: usize, close: &[u8]) -> Option<Tag> {
    // Open brackets, innermost last, each marked when it opens a call's arguments; and
    // how many of them are calls.
    let mut open: Vec<bool> = Vec::new();
    let mut open_calls = 0usize;
    let (mut deepest, mut calls, mut operators) = (0usize, 0usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut last_word = false;
    let mut i = from;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if bytes[i..].starts_with(close) {
            return Some(Tag {
                end: i + 2,
                brackets: deepest,
                calls,
                operators,
            });
        }
        let mut word = false;
        match b {
            b'"' | b'\'' | b'`' => quote = Some(b),
            b'(' | b'[' => {
                let call = b == b'(' && last_word;
                open.push(call);
                open_calls += usize::from(call);
                deepest = deepest.max(open.len());
                calls = calls.max(open_calls);
                if b == b'[' {
                    operators += 1;
                }
            }
            b')' | b']' => open_calls -= usize::from(open.pop() == Some(true)),
            b'+' | b'-' | b'*' | b'/' | b'%' | b'~' | b'|' | b'<' | b'>' | b'=' | b'!' | b',' => {
                operators += 1
            }
            c if is_word(c) => {
                // `and`, `or`, `not`, `in`, `is` as whole words.
                let len = bytes[i..].iter().take_while(|c| is_word(**c)).count();
                if matches!(&bytes[i..i + len], b"and" | b"or" | b"not" | b"in" | b"is") {
                    operators += 1;
                } else {
                    word = true;
                }
                i += len;
                last_word = word;
                continue;
            }
            _ if b.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            _ => {}
        }
        last_word = word;
        i += 1;
    }
    None
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_of_tag_finds_the_keyword_line() {
        let src = "\n\n{% macro r(n) %}{{ self::r(n=n) }}{% endmacro r %}{{ self::r(n=1) }}";
        assert_eq!(super::line_of_tag(src, "macro"), Some(3));
    }
}
