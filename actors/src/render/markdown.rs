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
/// they were written; an error (to show the sender) when the HTML would be longer than
/// `max_bytes`.
pub fn to_html(markdown: &str, max_bytes: usize) -> Result<String, String> {
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
    let html = restore(&out, &placeholder(nonce, 0), &tags);
    if html.len() > max_bytes {
        return Err(format!(
            "The Markdown body makes {} bytes of HTML; at most {max_bytes} are allowed",
            html.len()
        ));
    }
    Ok(html)
}

/// `html` with each placeholder put back as its tag, in one pass (a body may hold many).
/// A tag comes back once: Markdown copies a link reference's destination into every link
/// that uses it, and a tag in there, put back at each copy, would multiply the body
/// (megabytes of tag times thousands of links). A copy after the first is left out.
fn restore(html: &str, first: &str, tags: &[&str]) -> String {
    // Every placeholder starts as the first one does, up to its index.
    let prefix = &first[..first.len() - 2];
    let mut out = String::with_capacity(html.len());
    let mut restored = vec![false; tags.len()];
    let mut rest = html;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let index = after[..digits]
            .parse::<usize>()
            .ok()
            .filter(|i| *i < tags.len() && after.as_bytes().get(digits) == Some(&b'X'));
        match index {
            Some(i) => {
                if !restored[i] {
                    out.push_str(tags[i]);
                    restored[i] = true;
                }
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
        let html = to_html(
            "# Hello\n\nSome **bold** text and a [link](https://example.com).",
            1 << 20,
        )
        .unwrap();
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
        let html = to_html(md, 1 << 20).unwrap();
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
        let html = to_html("a { b {{ c", 1 << 20).unwrap();
        assert!(html.contains("a { b {{ c"), "{html}");
    }

    #[test]
    fn a_tag_in_a_link_reference_comes_back_once_however_many_links_use_it() {
        let tag = format!("{{# {} #}}", "A".repeat(10_000));
        let links = "[a] ".repeat(5_000);
        let html = to_html(&format!("[a]: {tag}\n\n{links}"), 1 << 20).unwrap();
        assert!(html.len() < 200_000, "{} bytes", html.len());
        assert_eq!(html.matches(&tag).count(), 1);
    }

    #[test]
    fn html_past_the_bound_is_an_error() {
        let err = to_html(&"word ".repeat(1_000), 100).unwrap_err();
        assert!(err.contains("at most 100"), "{err}");
    }
}
