//! Rendering subjects and bodies with tera, in the syntax of API.md section 4:
//! `{{name}}`, `{{ data.plan }}`, `{{name ?? "there"}}`. A plain variable that is
//! missing renders as the empty string (tera would refuse it), so each `{{ path }}` and
//! `{{ path ?? "fallback" }}` is rewritten to tera's `default` filter before compiling.
//! Conditionals, loops and filters are tera's, inside the sandbox (`sandbox`): no
//! outside state, no other templates, and a bound on the work of each render (`budget`).
//! Bodies are HTML-escaped; subjects and a sender's own text part are not.

pub mod budget;
mod cache;
pub mod markdown;
mod pool;
#[cfg(test)]
mod proptests;
pub mod sandbox;
mod structure;
mod syntax;

use serde_json::Value;
use tera::{Context, Tera};

pub use cache::TemplateCache;
pub use pool::RenderPool;

use crate::error::{Error, FieldCode, FieldError, Result};

const SUBJECT: &str = "subject.txt";
const BODY: &str = "body.html";
/// Not `.html`, so tera does not escape it: it becomes the text/plain part.
const TEXT: &str = "text.txt";

/// The bounds on tenant templates (config section `templates`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Charged steps one render may take (see `budget`).
    pub max_steps: u64,
    /// Bytes one render may make, as output or as any value along the way.
    pub max_output_bytes: u64,
    /// Blocks or brackets nested in one another.
    pub max_nesting: usize,
    /// Operators and filters in one tag.
    pub max_operators: usize,
    /// Parse work one template may take (see `sandbox::prescan`).
    pub max_parse_units: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 200_000,
            max_output_bytes: 4 << 20,
            max_nesting: 16,
            max_operators: 64,
            max_parse_units: 20_000,
        }
    }
}

/// A compiled subject and body, and the text part when the sender gave one. It keeps
/// the limits it was compiled under, so its renders are bounded by the same ones
/// (the engine's, from the render pool or the template cache; no process-wide value).
pub struct Compiled {
    tera: Tera,
    has_text: bool,
    limits: Limits,
}

/// One recipient's rendered email.
#[derive(Debug, Clone, PartialEq)]
pub struct Parts {
    pub subject: String,
    pub body: String,
    /// The sender's own text/plain part; None: it is made from the body at delivery.
    pub text: Option<String>,
}

/// Compiles a subject and body, or says which field fails and on which line. A template
/// is refused when it uses what the sandbox does not allow, or when it could exceed the
/// render limits even with no data (a loop over `range(end=10000000000)`).
impl Limits {
    pub fn compile(&self, subject: &str, body: &str) -> Result<Compiled> {
        self.compile_with_text(subject, body, None)
    }

    /// `compile`, with the sender's own text part when there is one.
    pub fn compile_with_text(
        &self,
        subject: &str,
        body: &str,
        text: Option<&str>,
    ) -> Result<Compiled> {
        // tera panics on a few inputs (a float literal too large for f64); a panic here
        // is a refused template, not a failed request.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compile_checked(subject, body, text, *self)
        }))
        .unwrap_or_else(|_| {
            Err(Error::field(
                "body",
                FieldCode::TemplateSyntax,
                "Template error: the template could not be compiled",
            ))
        })
    }
}

fn compile_checked(
    subject: &str,
    body: &str,
    text: Option<&str>,
    limits: Limits,
) -> Result<Compiled> {
    let mut tera = sandbox::engine(&limits);
    let mut errors = Vec::new();
    let mut parts = vec![(SUBJECT, "subject", subject), (BODY, "body", body)];
    if let Some(text) = text {
        parts.push((TEXT, "text", text));
    }
    for (name, field, src) in parts {
        if let Err(deep) = sandbox::prescan(src, &limits) {
            errors.push(FieldError::new(
                field,
                FieldCode::TemplateSyntax,
                format!("Template syntax error at line {}: {}", deep.line, deep.what),
            ));
            continue;
        }
        if let Err(fault) = structure::check(src) {
            errors.push(FieldError::new(
                field,
                FieldCode::TemplateSyntax,
                format!("Template syntax error: {fault}"),
            ));
            continue;
        }
        // Parsed and checked on its own first: adding a template to tera already
        // resolves `extends`, which must be refused before tera looks for its parent.
        // Once it passes, this same parse goes into the engine (no second parse).
        let source = syntax::to_tera(src);
        let parsed = match tera::Template::new(name, None, &source) {
            Ok(t) => t,
            Err(e) => {
                errors.push(FieldError::new(
                    field,
                    FieldCode::TemplateSyntax,
                    describe(&e),
                ));
                continue;
            }
        };
        if let Err(refused) = sandbox::check(&parsed.ast) {
            let at = sandbox::line_of_tag(src, refused.keyword)
                .or_else(|| {
                    let name = refused.name.as_deref()?;
                    structure::line_of_name(src, name)
                })
                .map(|l| format!(" at line {l}"))
                .unwrap_or_default();
            errors.push(FieldError::new(
                field,
                FieldCode::TemplateSyntax,
                format!("Template error{at}: {}", refused.what),
            ));
            continue;
        }
        let empty = Value::Object(Default::default());
        if let Err(over) = budget::charge(&parsed.ast, &empty, name == BODY, &limits) {
            errors.push(FieldError::new(
                field,
                FieldCode::TooBig,
                format!("Template is too costly: {}", over.0),
            ));
            continue;
        }
        // What `add_raw_template` does after its own parse.
        tera.templates.insert(name.to_owned(), parsed);
        if let Err(e) = tera.build_inheritance_chains() {
            errors.push(FieldError::new(
                field,
                FieldCode::TemplateSyntax,
                describe(&e),
            ));
        }
    }
    if errors.is_empty() {
        Ok(Compiled {
            tera,
            has_text: text.is_some(),
            limits,
        })
    } else {
        Err(Error::Validation(errors))
    }
}

impl Compiled {
    /// The parts compiled, each with the field that names it in an error.
    fn parts(&self) -> &'static [(&'static str, &'static str)] {
        const ALL: [(&str, &str); 3] = [(SUBJECT, "subject"), (BODY, "body"), (TEXT, "text")];
        if self.has_text {
            &ALL
        } else {
            &ALL[..2]
        }
    }

    /// Charges one render with `vars` (every part) against the limits: the steps
    /// it may take, or the 422 that says which limit it would pass.
    pub fn charge(&self, vars: &Value) -> Result<u64> {
        let limits = self.limits;
        let mut total = 0u64;
        for &(name, field) in self.parts() {
            let ast = &self.tera.templates[name].ast;
            let charge = budget::charge(ast, vars, name == BODY, &limits).map_err(|over| {
                Error::field(
                    field,
                    FieldCode::TooBig,
                    format!("Template is too costly: {}", over.0),
                )
            })?;
            total += charge.steps;
        }
        Ok(total)
    }

    /// Renders (subject, body) with variables that `charge` has accepted.
    pub fn render_charged(&self, vars: Value) -> Result<(String, String)> {
        self.render_parts_charged(vars).map(|p| (p.subject, p.body))
    }

    /// Renders every part with variables that `charge` has accepted.
    pub fn render_parts_charged(&self, vars: Value) -> Result<Parts> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.render_unchecked(vars)))
            .unwrap_or_else(|_| {
                Err(Error::field(
                    "body",
                    FieldCode::TemplateSyntax,
                    "Template error: rendering failed with this data",
                ))
            })
    }

    fn render_unchecked(&self, vars: Value) -> Result<Parts> {
        let limits = self.limits;
        let ctx = Context::from_value(vars).map_err(|e| Error::Internal(e.to_string()))?;
        let mut out = Vec::with_capacity(3);
        for &(name, field) in self.parts() {
            let text = self
                .tera
                .render(name, &ctx)
                .map_err(|e| Error::field(field, FieldCode::TemplateSyntax, describe(&e)))?;
            if text.len() as u64 > limits.max_output_bytes {
                return Err(Error::field(
                    field,
                    FieldCode::TooBig,
                    format!(
                        "Rendered {} bytes; the limit is {}",
                        text.len(),
                        limits.max_output_bytes
                    ),
                ));
            }
            out.push(text);
        }
        let mut out = out.into_iter();
        Ok(Parts {
            subject: out.next().unwrap_or_default(),
            body: out.next().unwrap_or_default(),
            text: out.next(),
        })
    }

    /// Renders (subject, body) with the variables of one recipient, after charging the
    /// render's worst case against the limits. Call it off any actor's thread: it is
    /// bounded, but a bounded render can still take milliseconds.
    pub fn render(&self, vars: &Value) -> Result<(String, String)> {
        self.charge(vars)?;
        self.render_charged(vars.clone())
    }
}

/// tera's message chain, reduced to "line L, column C: what was expected".
fn describe(e: &tera::Error) -> String {
    use std::error::Error as _;
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push('\n');
        text.push_str(&s.to_string());
        source = s.source();
    }
    let location = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("--> "))
        .and_then(|pos| pos.split_once(':'))
        .map(|(line, col)| format!("line {line}, column {col}"));
    let detail = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("= "))
        .map(|l| l.trim_start().trim_start_matches("= ").to_owned())
        .unwrap_or_else(|| text.lines().last().unwrap_or_default().to_owned());
    match location {
        Some(at) => format!("Template syntax error at {at}: {detail}"),
        None => format!("Template error: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(subject: &str, body: &str) -> Result<Compiled> {
        Limits::default().compile(subject, body)
    }

    fn compile_with_text(subject: &str, body: &str, text: Option<&str>) -> Result<Compiled> {
        Limits::default().compile_with_text(subject, body, text)
    }

    #[test]
    fn two_engines_in_one_process_each_render_within_their_own_limits() {
        let small = Limits {
            max_output_bytes: 64,
            ..Limits::default()
        };
        let body = "{% for x in items %}<p>{{ x }}</p>{% endfor %}";
        let vars = json!({ "items": vec!["Ada Lovelace"; 20] });
        let roomy = Limits::default().compile("s", body).unwrap();
        let tight = small.compile("s", body).unwrap();
        assert!(roomy.render(&vars).is_ok(), "the default limits allow it");
        let Err(Error::Validation(fields)) = tight.render(&vars) else {
            panic!("the small limits refuse it")
        };
        assert_eq!(
            (fields[0].field.as_str(), fields[0].code),
            ("body", FieldCode::TooBig)
        );
        assert!(
            Limits::default()
                .compile("s", body)
                .unwrap()
                .render(&vars)
                .is_ok(),
            "compiling under the small limits changed nothing for the default ones"
        );
        let fixed = "{% for i in range(end=20) %}<p>{{ i }}</p>{% endfor %}";
        assert!(Limits::default().compile("s", fixed).is_ok());
        assert!(
            small.compile("s", fixed).is_err(),
            "refused at compile time too"
        );
    }

    #[test]
    fn variables_fallbacks_and_missing_values_render_as_the_contract_says() {
        let c = compile(
            "Hi {{name ?? \"there\"}} & co",
            "<p>{{ data.plan }}|{{missing}}|{{name}}|{% if vip %}VIP{% endif %}</p>",
        )
        .unwrap();
        let (s, b) = c
            .render(&json!({"data": {"plan": "pro"}, "name": "<Ada>", "vip": true}))
            .unwrap();
        assert_eq!(s, "Hi <Ada> & co", "subjects are not escaped");
        assert_eq!(b, "<p>pro||&lt;Ada&gt;|VIP</p>", "bodies are escaped");
        let (s, _) = c.render(&json!({})).unwrap();
        assert_eq!(s, "Hi there & co");
    }

    #[test]
    fn a_text_part_renders_with_the_same_variables_and_is_not_escaped() {
        let c =
            compile_with_text("s", "<p>{{name}}</p>", Some("Hi {{name ?? \"you\"}} & co")).unwrap();
        let parts = c.render_parts_charged(json!({"name": "<Ada>"})).unwrap();
        assert_eq!(parts.body, "<p>&lt;Ada&gt;</p>");
        assert_eq!(parts.text.as_deref(), Some("Hi <Ada> & co"));
        let without = compile("s", "b").unwrap();
        assert_eq!(without.render_parts_charged(json!({})).unwrap().text, None);
        let Err(Error::Validation(fields)) = compile_with_text("s", "b", Some("{{ broken")) else {
            panic!("a broken text part must be refused")
        };
        assert_eq!(fields[0].field, "text");
    }

    fn refusal(subject: &str, body: &str) -> (String, FieldCode, String) {
        let Err(Error::Validation(fields)) = compile(subject, body) else {
            panic!("expected {body:?} to be refused")
        };
        let f = &fields[0];
        (f.field.clone(), f.code, f.message.clone())
    }

    #[test]
    fn templates_cannot_reach_the_environment_or_any_function_but_range() {
        for call in [
            "{{ get_env(name=\"PATH\") }}",
            "{{ get_random(end=5) }}",
            "{{ now() }}",
            "{{ throw(message=\"x\") }}",
        ] {
            let (field, code, message) = refusal("ok", call);
            assert_eq!((field.as_str(), code), ("body", FieldCode::TemplateSyntax));
            assert!(message.contains("not available"), "{call}: {message}");
        }
        let (field, _, _) = refusal("{{ get_env(name=\"HOME\") | upper }}", "ok");
        assert_eq!(field, "subject");
        assert!(compile("ok", "{% for i in range(end=3) %}{{ i }}{% endfor %}").is_ok());
    }

    #[test]
    fn other_templates_macros_and_set_are_refused_with_their_line() {
        for (body, line) in [
            ("a\n{% include \"body.html\" %}", 2),
            ("{% extends \"body.html\" %}", 1),
            ("x\ny\n{% import \"m\" as m %}", 3),
            ("{% macro f() %}{{ self::f() }}{% endmacro f %}", 1),
            ("\n{% set a = \"x\" %}{{ a }}", 2),
            ("{% set_global a = 1 %}", 1),
        ] {
            let (_, code, message) = refusal("ok", body);
            assert_eq!(code, FieldCode::TemplateSyntax, "{body}");
            assert!(
                message.contains(&format!("line {line}")),
                "{body}: {message}"
            );
        }
    }

    #[test]
    fn deep_nesting_and_endless_expressions_are_refused_before_tera_parses_them() {
        let deep = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
        assert!(refusal("ok", &deep).2.contains("brackets"));
        let long = format!("{{{{ {} }}}}", vec!["1"; 200_000].join("+"));
        assert!(refusal("ok", &long).2.contains("operators"));
        let ifs = "{% if a %}".repeat(100);
        assert!(refusal(&ifs, "ok").2.contains("nest"));
    }

    #[test]
    fn a_loop_that_could_run_forever_is_refused_at_save() {
        let (field, code, message) = refusal(
            "ok",
            "{% for i in range(end=100000) %}{% for j in range(end=100000) %}{% endfor %}{% endfor %}",
        );
        assert_eq!((field.as_str(), code), ("body", FieldCode::TooBig));
        assert!(message.contains("steps"), "{message}");
    }

    #[test]
    fn loops_over_contact_data_are_charged_with_that_data_before_rendering() {
        let c = compile(
            "ok",
            "{% for a in items %}{% for b in items %}{% for c in items %}.{% endfor %}{% endfor %}{% endfor %}",
        )
        .unwrap();
        let small = json!({"items": [1, 2, 3]});
        assert_eq!(c.render(&small).unwrap().1, ".".repeat(27));
        let big = json!({"items": (0..10_000).collect::<Vec<_>>()});
        let started = std::time::Instant::now();
        let Err(Error::Validation(fields)) = c.render(&big) else {
            panic!("10^12 iterations must be refused")
        };
        assert_eq!(fields[0].code, FieldCode::TooBig);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn values_that_grow_through_filters_are_refused_before_they_are_made() {
        let chain = format!("{{{{ x{} }}}}", " | json_encode".repeat(5));
        let c = compile(&chain, "ok").unwrap();
        assert!(c.render(&json!({"x": "a"})).is_ok());
        let Err(Error::Validation(fields)) = c.render(&json!({"x": "\"".repeat(10_000)})) else {
            panic!("a 6^5 growth of 10 KB must be refused")
        };
        assert!(fields[0].message.contains("bytes"), "{}", fields[0].message);
        let replace = compile("ok", "{{ x | replace(from=\"a\", to=x) }}").unwrap();
        assert!(replace.render(&json!({"x": "a".repeat(100_000)})).is_err());
        assert!(replace.render(&json!({"x": "abc"})).is_ok());
    }

    // The cases below came from a review of the sandbox as a hostile tenant.

    #[test]
    fn the_word_endraw_inside_a_raw_block_does_not_end_it_for_the_prescan() {
        let deep = format!(
            "{{% raw %}}endraw{{{{'{{% endraw %}}{{{{ {}1{} }}}}",
            "(".repeat(400_000),
            ")".repeat(400_000)
        );
        let (_, code, message) = refusal("ok", &deep);
        assert_eq!(code, FieldCode::TemplateSyntax);
        assert!(message.contains("brackets"), "{message}");
        let (_, _, message) = refusal("ok", "{% raw %}never closed");
        assert!(message.contains("raw"), "{message}");
        let (_, _, message) = refusal("ok", "{{ 'never closed }}");
        assert!(message.contains("not closed"), "{message}");
        assert!(compile("ok", "{% raw %}{{ kept }}{%- endraw -%}x").is_ok());
    }

    #[test]
    fn nested_calls_are_bounded_since_each_level_quadruples_the_parse() {
        let nested = |depth: usize| {
            format!(
                "{{{{ x{} }}}}",
                " | default(value=x".repeat(depth) + &")".repeat(depth)
            )
        };
        assert!(compile("ok", &nested(3)).is_ok());
        let started = std::time::Instant::now();
        let (_, _, message) = refusal("ok", &nested(16));
        assert!(message.contains("calls nest"), "{message}");
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        // Many cheap tags add up: a megabyte of two-level calls is refused before parsing.
        let many = "{{ range(end=range(end=1)) }}".repeat(40_000);
        let started = std::time::Instant::now();
        let (_, _, message) = refusal("ok", &many);
        assert!(message.contains("too many expressions"), "{message}");
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
    }

    #[test]
    fn a_variable_named_loop_is_charged_as_the_data_it_is() {
        let c = compile(
            "ok",
            "{{ loop | replace(from=\"a\", to=loop) | replace(from=\"a\", to=loop) }}",
        )
        .unwrap();
        assert!(c.render(&json!({"loop": "a".repeat(8000)})).is_err());
        let c = compile(
            "ok",
            "{% for x in loop %}{% for y in loop %}{% for z in loop %}.{% endfor %}{% endfor %}{% endfor %}",
        )
        .unwrap();
        assert!(c
            .render(&json!({"loop": (0..1000).collect::<Vec<_>>()}))
            .is_err());
        let ok = compile("ok", "{% for x in items %}{{ loop.index }}{% endfor %}").unwrap();
        assert_eq!(ok.render(&json!({"items": [5, 6]})).unwrap().1, "12");
    }

    #[test]
    fn the_whole_context_and_pretty_json_are_refused() {
        for body in [
            "{{ __tera_context }}",
            "{% for c in __tera_context %}{% endfor %}",
            "{% if __tera_context is defined %}{% endif %}",
            "{{ x | json_encode(pretty=true) }}",
        ] {
            let (_, code, message) = refusal("ok", body);
            assert_eq!(code, FieldCode::TemplateSyntax, "{body}");
            assert!(
                message.contains("not available") || message.contains("pretty"),
                "{body}: {message}"
            );
        }
    }

    #[test]
    fn repeated_lookups_count_as_operators() {
        let body = format!(
            "{{% for x in range(end=1) %}}{{{{ a{} }}}}{{% endfor %}}",
            "[x]".repeat(300_000)
        );
        let (_, _, message) = refusal("ok", &body);
        assert!(message.contains("operators"), "{message}");
    }

    #[test]
    fn filters_that_add_their_arguments_are_charged_for_them() {
        let big = "x".repeat(500_000);
        let truncate = format!(
            "{{% for i in range(end=30000) %}}{{{{ \"ab\" | truncate(length=1, end=\"{big}\") }}}}{{% endfor %}}"
        );
        assert!(compile("ok", &truncate).is_err());
        let empty_from = format!(
            "{{{{ s{} }}}}",
            " | replace(from=\"\", to=\"a\")".repeat(15)
        );
        let c = compile("ok", &empty_from).unwrap();
        assert!(c.render(&json!({"s": "a".repeat(60_000)})).is_err());
        assert_eq!(
            compile("ok", "{{ s | replace(from=\"\", to=\"-\") }}")
                .unwrap()
                .render(&json!({"s": "ab"}))
                .unwrap()
                .1,
            "-a-b-"
        );
        let copies = compile(
            "ok",
            "{% for i in range(end=20000) %}{% if email is containing(big) %}{% endif %}{% for k, v in o %}{% endfor %}{% endfor %}",
        )
        .unwrap();
        let key = "k".repeat(60_000);
        assert!(copies
            .render(&json!({"big": "b".repeat(60_000), "o": {key: 0}, "email": "e"}))
            .is_err());
    }

    #[test]
    fn what_makes_tera_panic_is_a_clear_error() {
        let c = compile("ok", "{{ \"1\" | int(base=1) }}").unwrap();
        assert!(matches!(c.render(&json!({})), Err(Error::Validation(_))));
        let c = compile("ok", "{{ x + x }}").unwrap();
        assert!(matches!(
            c.render(&json!({"x": 1e308})),
            Err(Error::Validation(_))
        ));
        let huge = format!("{{{{ 1{}.0 + 1 }}}}", "0".repeat(400));
        assert!(matches!(
            compile("ok", &huge).and_then(|c| c.render(&json!({}))),
            Err(Error::Validation(_))
        ));
    }

    #[test]
    fn a_template_that_does_not_compile_names_the_field_and_the_line() {
        let err = compile("ok", "line one\nline two {{ broken").err().unwrap();
        let Error::Validation(fields) = err else {
            panic!("expected a validation error")
        };
        assert_eq!(fields[0].field, "body");
        assert_eq!(fields[0].code, FieldCode::TemplateSyntax);
        assert!(
            fields[0].message.contains("line 2"),
            "{}",
            fields[0].message
        );
    }
}
