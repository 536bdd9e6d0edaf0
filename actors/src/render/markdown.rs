//! Markdown bodies (`/v1/send` with `type: "markdown"`, as the official Plunk client
//! offers): the Markdown becomes HTML first, and the HTML is then rendered as a template.
//! Template tags are set aside while the Markdown is converted, so that the converter
//! neither escapes their quotes and operators (`"fallback"`, `>`) nor reads their
//! characters as emphasis (`{{ first_name }}`); each comes back exactly as written.

use pulldown_cmark::{html, Options, Parser};

/// A placeholder of letters and digits only, which Markdown leaves as it is. The nonce
/// keeps a body that happens to contain the same letters from being changed.
fn placeholder(nonce: u64, i: usize) -> String {
    format!("MRTAG{nonce:016x}N{i}X")
}

/// The HTML for a Markdown body whose template tags (`{{ }}`, `{% %}`, `{# #}`) stay as
/// they were written.
pub fn to_html(markdown: &str) -> String {
    let nonce: u64 = rand::random();
    let mut tags = Vec::new();
    let mut text = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(start) = rest.find('{') {
        let close = match rest.as_bytes().get(start + 1) {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            Some(b'#') => "#}",
            _ => {
                text.push_str(&rest[..=start]);
                rest = &rest[start + 1..];
                continue;
            }
        };
        let Some(len) = rest[start + 2..].find(close) else {
            break;
        };
        let end = start + 2 + len + 2;
        text.push_str(&rest[..start]);
        text.push_str(&placeholder(nonce, tags.len()));
        tags.push(&rest[start..end]);
        rest = &rest[end..];
    }
    text.push_str(rest);
    let mut out = String::with_capacity(text.len() * 5 / 4);
    html::push_html(
        &mut out,
        Parser::new_ext(
            &text,
            Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
        ),
    );
    restore(&out, &placeholder(nonce, 0), &tags)
}

/// `html` with each placeholder put back as its tag, in one pass (a body may hold many).
fn restore(html: &str, first: &str, tags: &[&str]) -> String {
    // Every placeholder starts as the first one does, up to its index.
    let prefix = &first[..first.len() - 2];
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let tag = after[..digits]
            .parse::<usize>()
            .ok()
            .filter(|_| after.as_bytes().get(digits) == Some(&b'X'))
            .and_then(|i| tags.get(i));
        match tag {
            Some(tag) => {
                out.push_str(tag);
                rest = &after[digits + 1..];
            }
            None => {
                out.push_str(prefix);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::to_html;

    #[test]
    fn markdown_becomes_html() {
        let html = to_html("# Hello\n\nSome **bold** text and a [link](https://example.com).");
        assert!(html.contains("<h1>Hello</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.com\">link</a>"),
            "{html}"
        );
    }

    #[test]
    fn template_tags_come_back_as_written() {
        let md = "Hi {{ first_name ?? \"there\" }}!\n\n{% if data.plan > 1 %}*pro*{% endif %} {# note #}";
        let html = to_html(md);
        assert!(html.contains("{{ first_name ?? \"there\" }}"), "{html}");
        assert!(
            html.contains("{% if data.plan > 1 %}<em>pro</em>{% endif %}"),
            "{html}"
        );
        assert!(html.contains("{# note #}"), "{html}");
        assert!(!html.contains("MRTAG"), "{html}");
    }

    #[test]
    fn an_unclosed_tag_and_a_lone_brace_are_plain_text() {
        let html = to_html("a { b {{ c");
        assert!(html.contains("a { b {{ c"), "{html}");
    }
}
