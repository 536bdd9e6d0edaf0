//! Rewrites `{{ path }}` and `{{ path ?? "fallback" }}` into tera's `default` filter, so
//! a missing variable renders empty (or as its fallback) instead of failing. Anything
//! inside `{{ }}` that is not a plain path (filters, arithmetic) is left to tera.

pub fn to_tera(src: &str) -> String {
    let mut out = String::with_capacity(src.len() + 32);
    let mut rest = src;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        match rewrite(inner) {
            Some(expr) => {
                out.push_str("{{ ");
                out.push_str(&expr);
                out.push_str(" }}");
            }
            None => {
                out.push_str("{{");
                out.push_str(inner);
                out.push_str("}}");
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

fn is_path(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn rewrite(inner: &str) -> Option<String> {
    let inner = inner
        .trim()
        .trim_start_matches('-')
        .trim_end_matches('-')
        .trim();
    let (path, fallback) = match inner.split_once("??") {
        Some((p, f)) => (p.trim(), Some(f.trim())),
        None => (inner, None),
    };
    if !is_path(path) {
        return None;
    }
    let fallback = match fallback {
        None => "\"\"".to_owned(),
        Some(f)
            if (f.starts_with('"') && f.ends_with('"') && f.len() >= 2)
                || (f.starts_with('\'') && f.ends_with('\'') && f.len() >= 2) =>
        {
            f.to_owned()
        }
        Some(_) => return None,
    };
    Some(format!("{path} | default(value={fallback})"))
}

#[cfg(test)]
mod tests {
    use super::to_tera;

    #[test]
    fn plain_paths_and_fallbacks_get_a_default_and_the_rest_is_untouched() {
        assert_eq!(
            to_tera("Hi {{name}}!"),
            "Hi {{ name | default(value=\"\") }}!"
        );
        assert_eq!(
            to_tera("{{ data.plan ?? \"free\" }}"),
            "{{ data.plan | default(value=\"free\") }}"
        );
        assert_eq!(
            to_tera("{{ n + 1 }} {% if x %}y{% endif %}"),
            "{{ n + 1 }} {% if x %}y{% endif %}"
        );
        assert_eq!(to_tera("a\n{{ b"), "a\n{{ b");
    }
}
