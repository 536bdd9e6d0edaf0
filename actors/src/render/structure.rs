//! The block structure of a template's tags, checked before tera parses it: tera reports
//! an unclosed `{% if %}` at the end of the text, as what it expected there, which does
//! not say which block is open nor where it began. This check names the tag and its
//! line ("`{% if %}` opened at line 2 is never closed"). It runs after the prescan, so
//! every tag, comment and `raw` block here is known to close.

use super::sandbox;

/// Tags that open a block, and the tag that ends each.
const BLOCKS: &[(&str, &str)] = &[
    ("if", "endif"),
    ("for", "endfor"),
    ("filter", "endfilter"),
    ("macro", "endmacro"),
    ("block", "endblock"),
];

/// Tags that stand alone. Some are refused later, with their own message (`set`,
/// `include`, ...); they are known tags all the same.
const SINGLE: &[&str] = &[
    "elif",
    "else",
    "break",
    "continue",
    "set",
    "set_global",
    "include",
    "extends",
    "import",
    "raw",
];

/// A block opened and not yet closed.
struct Open {
    word: &'static str,
    end: &'static str,
    line: usize,
}

/// The first fault in the nesting of `src`'s block tags, in words, if any.
pub fn check(src: &str) -> Result<(), String> {
    let mut open: Vec<Open> = Vec::new();
    for (word, at) in tags(src) {
        let line = line_at(src, at);
        if let Some(&(start, end)) = BLOCKS.iter().find(|(start, _)| *start == word) {
            open.push(Open {
                word: start,
                end,
                line,
            });
        } else if let Some(&(start, end)) = BLOCKS.iter().find(|(_, end)| *end == word) {
            match open.pop() {
                Some(o) if o.end == end => {}
                Some(o) => {
                    return Err(format!(
                        "`{{% {end} %}}` at line {line} does not match the `{{% {} %}}` opened at \
                         line {}, which needs `{{% {} %}}` first",
                        o.word, o.line, o.end
                    ))
                }
                None => {
                    return Err(format!(
                    "`{{% {end} %}}` at line {line} closes nothing: no `{{% {start} %}}` is open"
                ))
                }
            }
        } else if word == "elif" || word == "else" {
            let inside = match open.last() {
                Some(o) => o.word == "if" || (word == "else" && o.word == "for"),
                None => false,
            };
            if !inside {
                let of = if word == "else" {
                    "an `{% if %}` or a `{% for %}`"
                } else {
                    "an `{% if %}`"
                };
                return Err(format!(
                    "`{{% {word} %}}` at line {line} is not inside {of}"
                ));
            }
        } else if !SINGLE.contains(&word) && !word.is_empty() {
            return Err(format!(
                "`{{% {word} %}}` at line {line} is not a tag templates know; they have \
                 if, elif, else, endif, for, endfor, break, continue, filter, endfilter, raw \
                 and endraw"
            ));
        }
    }
    match open.last() {
        Some(o) => Err(format!(
            "`{{% {} %}}` opened at line {} is never closed; add `{{% {} %}}`",
            o.word, o.line, o.end
        )),
        None => Ok(()),
    }
}

/// The first word and the byte offset of each `{% %}` tag.
fn tags(src: &str) -> Vec<(&str, usize)> {
    spans(src)
        .into_iter()
        .filter(|(at, _)| src[*at..].starts_with("{%"))
        .map(|(at, end)| (sandbox::first_word(&src[at + 2..end - 2]), at))
        .collect()
}

/// Where each `{{ }}` and `{% %}` tag starts and ends, skipping comments and the inside
/// of `raw` blocks.
fn spans(src: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = src[i..].find('{') {
        let at = i + found;
        let rest = &src[at..];
        let close = if rest.starts_with("{%") {
            "%}"
        } else if rest.starts_with("{{") {
            "}}"
        } else if rest.starts_with("{#") {
            "#}"
        } else {
            i = at + 1;
            continue;
        };
        let Some(end) = tag_end(src, at + 2, close) else {
            break;
        };
        i = end;
        if close == "#}" {
            continue;
        }
        out.push((at, end));
        if close == "%}" && sandbox::first_word(&src[at + 2..end - 2]) == "raw" {
            match sandbox::find_endraw(src, end) {
                Some(after) => i = after,
                None => break,
            }
        }
    }
    out
}

/// The line of the first tag that uses `name` as a whole word (a filter, function or
/// test), for an error message.
pub fn line_of_name(src: &str, name: &str) -> Option<usize> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    spans(src).into_iter().find_map(|(at, end)| {
        let inside = &src[at..end];
        inside.match_indices(name).find_map(|(i, _)| {
            let before = i.checked_sub(1).map(|b| inside.as_bytes()[b]);
            let after = inside.as_bytes().get(i + name.len()).copied();
            (!before.is_some_and(is_word) && !after.is_some_and(is_word))
                .then(|| line_at(src, at + i))
        })
    })
}

/// Where the tag whose inside starts at `from` ends (after `close`), reading past string
/// literals in `{{ }}` and `{% %}`.
fn tag_end(src: &str, from: usize, close: &str) -> Option<usize> {
    if close == "#}" {
        return src[from..].find(close).map(|at| from + at + 2);
    }
    let bytes = src.as_bytes();
    let mut quote = None;
    let mut i = from;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if matches!(b, b'"' | b'\'' | b'`') => quote = Some(b),
            None if src[i..].starts_with(close) => return Some(i + 2),
            None => {}
        }
        i += 1;
    }
    None
}

fn line_at(src: &str, pos: usize) -> usize {
    src[..pos].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn well_nested_blocks_pass() {
        for ok in [
            "{% if a %}x{% elif b %}y{% else %}z{% endif %}",
            "{%- for x in xs -%}{{ x }}{% else %}none{% endfor %}",
            "{% raw %}{% if %}{% endraw %}{# {% for %} #}{{ \"{% if\" }}",
            "{% filter upper %}{% if a %}b{% endif %}{% endfilter %}",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn each_fault_names_the_tag_and_its_line() {
        let fault = |src: &str| check(src).unwrap_err();
        assert_eq!(
            fault("Hi\n{% if vip %}\nVIP"),
            "`{% if %}` opened at line 2 is never closed; add `{% endif %}`"
        );
        assert!(
            fault("{% for x in y %}\n{% if x %}\n{% endfor %}").starts_with(
                "`{% endfor %}` at line 3 does not match the `{% if %}` opened at line 2"
            )
        );
        assert_eq!(
            fault("a\n{% endif %}"),
            "`{% endif %}` at line 2 closes nothing: no `{% if %}` is open"
        );
        assert!(fault("{% else %}").contains("is not inside"));
        assert!(fault("\n{% iff a %}{% endif %}").starts_with("`{% iff %}` at line 2 is not a tag"));
    }

    #[test]
    fn a_name_is_found_in_tags_only() {
        let src = "shout\n{{ a | upper }}\n{{ b | shout }}";
        assert_eq!(super::line_of_name(src, "shout"), Some(3));
        assert_eq!(super::line_of_name("{{ shouter }}", "shout"), None);
    }
}
