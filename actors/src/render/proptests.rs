//! Random templates against the sandbox, on the stable toolchain: text stitched from
//! tera's own pieces (tags, loops, filters, brackets, quotes, raw blocks, comments) with
//! random data. Whatever the text, compiling and rendering answer (Ok or a 422), never
//! panic, stay within the output bound and finish quickly.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{Compiled, Limits};

fn compile(subject: &str, body: &str) -> crate::error::Result<Compiled> {
    Limits::default().compile(subject, body)
}

fn limits() -> Limits {
    Limits::default()
}

const PIECES: &[&str] = &[
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "#}",
    "{{-",
    "-}}",
    " ",
    "x",
    "items",
    "name",
    "loop",
    "loop.index",
    "for x in items",
    "for k, v in obj",
    "endfor",
    "if x",
    "elif x",
    "else",
    "endif",
    "raw",
    "endraw",
    "filter upper",
    "endfilter",
    "| upper",
    "| escape",
    "| json_encode",
    "| replace(from=\"a\", to=name)",
    "| replace(from=\"\", to=name)",
    "| join(sep=name)",
    "| truncate(length=1, end=name)",
    "| split(pat=\",\")",
    "| length",
    "| default(value=name)",
    "range(end=5)",
    "range(end=n)",
    "(",
    ")",
    "[",
    "]",
    "[x]",
    "~",
    "+",
    "*",
    "and",
    "not",
    "in",
    "is defined",
    "\"",
    "'",
    ",",
    "0",
    "1e308",
    "__tera_context",
    "set a = 1",
    "include \"body.html\"",
    "macro m()",
    "get_env(name=\"PATH\")",
];

fn template() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|p| p.concat())
}

fn data() -> impl Strategy<Value = Value> {
    (0usize..200, 0usize..2_000, 0u64..1_000_000).prop_map(|(n, len, big)| {
        json!({
            "items": (0..n).map(|i| "a".repeat(i % 7)).collect::<Vec<_>>(),
            "name": "a,".repeat(len),
            "x": true,
            "n": big,
            "obj": {"k": "v"},
            "loop": "a".repeat(len),
        })
    })
}

/// An expression: a value and a few filters.
fn expr() -> impl Strategy<Value = String> {
    let atom = prop::sample::select(vec![
        "x",
        "name",
        "items",
        "loop",
        "n",
        "\"a\"",
        "range(end=3)",
        "range(end=n)",
        "items[0]",
        "obj.k",
        "(name ~ name)",
        "(n + 1)",
        "[name, name]",
        "loop.index",
    ]);
    let filter = prop::sample::select(vec![
        "",
        " | upper",
        " | escape",
        " | json_encode",
        " | replace(from=\"a\", to=name)",
        " | replace(from=\"\", to=name)",
        " | join(sep=name)",
        " | length",
        " | first",
        " | truncate(length=2, end=name)",
        " | split(pat=\",\")",
        " | default(value=name)",
        " | sort",
        " | unique",
        " | reverse",
        " | indent(prefix=name)",
        " | linebreaksbr",
    ]);
    (atom, prop::collection::vec(filter, 0..4)).prop_map(|(a, f)| format!("{a}{}", f.concat()))
}

/// A well-formed template: text, output, and nested if, for and filter blocks.
fn structured() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("text ".to_owned()),
        expr().prop_map(|e| format!("{{{{ {e} }}}}")),
        Just("{% raw %}{{ kept }}{% endraw %}".to_owned()),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let body = prop::collection::vec(inner, 1..6).prop_map(|b| b.concat());
        prop_oneof![
            (expr(), body.clone())
                .prop_map(|(e, b)| format!("{{% for v in {e} %}}{b}{{% endfor %}}")),
            (expr(), body.clone())
                .prop_map(|(e, b)| format!("{{% if {e} %}}{b}{{% else %}}.{{% endif %}}")),
            body.clone()
                .prop_map(|b| format!("{{% filter upper %}}{b}{{% endfilter %}}")),
            body,
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn well_formed_templates_render_within_bounds_or_are_refused(body in structured(), vars in data()) {
        let started = std::time::Instant::now();
        let c = compile("s", &body);
        if let Ok(c) = &c {
            if let Ok((_, b)) = c.render(&vars) {
                prop_assert!(b.len() <= limits().max_output_bytes as usize);
            }
        }
        prop_assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{body:?} took {:?}", started.elapsed()
        );
    }

    #[test]
    fn any_template_and_data_answer_within_bounds(subject in template(), body in template(), vars in data()) {
        let started = std::time::Instant::now();
        if let Ok(c) = compile(&subject, &body) {
            if let Ok((s, b)) = c.render(&vars) {
                let max = limits().max_output_bytes as usize;
                prop_assert!(s.len() <= max && b.len() <= max);
            }
        }
        prop_assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{subject:?} / {body:?} took {:?}", started.elapsed()
        );
    }
}
