//! Rendering subjects and bodies with tera, in the syntax of API.md section 4:
//! `{{name}}`, `{{ data.plan }}`, `{{name ?? "there"}}`. A plain variable that is
//! missing renders as the empty string (tera would refuse it), so each `{{ path }}` and
//! `{{ path ?? "fallback" }}` is rewritten to tera's `default` filter before compiling.
//! Everything else (conditionals, loops, filters) is tera as it is. Bodies are
//! HTML-escaped, subjects are not.

mod cache;
mod syntax;

use serde_json::Value;
use tera::{Context, Tera};

pub use cache::TemplateCache;

use crate::error::{Error, FieldCode, Result};

const SUBJECT: &str = "subject.txt";
const BODY: &str = "body.html";

/// A compiled subject and body pair.
pub struct Compiled {
    tera: Tera,
}

/// Compiles a subject and body, or says which field fails and on which line.
pub fn compile(subject: &str, body: &str) -> Result<Compiled> {
    let mut tera = Tera::default();
    tera.autoescape_on(vec![".html"]);
    let mut errors = Vec::new();
    for (name, field, src) in [(SUBJECT, "subject", subject), (BODY, "body", body)] {
        if let Err(e) = tera.add_raw_template(name, &syntax::to_tera(src)) {
            errors.push(crate::error::FieldError::new(
                field,
                FieldCode::TemplateSyntax,
                describe(&e),
            ));
        }
    }
    if errors.is_empty() {
        Ok(Compiled { tera })
    } else {
        Err(Error::Validation(errors))
    }
}

impl Compiled {
    /// Renders (subject, body) with the variables of one recipient.
    pub fn render(&self, vars: &Value) -> Result<(String, String)> {
        let ctx = Context::from_value(vars.clone()).map_err(|e| Error::Internal(e.to_string()))?;
        let render = |name: &str| {
            self.tera.render(name, &ctx).map_err(|e| {
                Error::field(
                    if name == SUBJECT { "subject" } else { "body" },
                    FieldCode::TemplateSyntax,
                    describe(&e),
                )
            })
        };
        Ok((render(SUBJECT)?, render(BODY)?))
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
