//! The text/plain alternative of an HTML email. Filters score HTML-only mail as spam
//! (SpamAssassin's MIME_HTML_ONLY), and some readers show only text, so every email
//! carries both. A small converter rather than a browser-grade parser: the HTML is our
//! own rendering of a tenant's template, and the text only has to read well. It never
//! fails: what it does not understand it passes on as text.

/// The words of `html` as a reader sees them: blocks on their own lines, list items
/// with a dash, links as `text (url)`, images as their `alt` text, and nothing of the
/// `<head>`, styles or scripts.
pub fn from_html(html: &str) -> String {
    let mut w = Writer::default();
    let mut rest = html;
    while !rest.is_empty() {
        let Some(at) = rest.find('<') else {
            w.text(rest);
            break;
        };
        w.text(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        match Tag::read(rest) {
            Some((tag, len)) => {
                rest = &rest[len..];
                if let Some(kind) = w.skipping {
                    if tag.end && tag.name == kind {
                        w.skipping = None;
                    }
                    continue;
                }
                w.tag(&tag);
            }
            None => {
                w.text("<");
                rest = &rest[1..];
            }
        }
    }
    w.finish()
}

/// Elements whose content a reader never sees.
const HIDDEN: &[&str] = &["head", "style", "script", "title", "template"];
/// Elements that stand apart from what is around them by a blank line.
const PARAGRAPHS: &[&str] = &[
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "dl",
    "table",
    "blockquote",
    "pre",
    "hr",
    "figure",
    "address",
];
/// Elements that start on a new line.
const LINES: &[&str] = &[
    "div",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "nav",
    "aside",
    "center",
    "form",
    "figcaption",
    "dt",
    "dd",
    "body",
];

/// One start or end tag, its name lowercased.
struct Tag {
    name: String,
    end: bool,
    attrs: Vec<(String, String)>,
}

impl Tag {
    /// The tag at the start of `s` (which starts with `<`) and its length, if it is one;
    /// `<!DOCTYPE ...>` and `<?...>` read as tags that nothing handles.
    fn read(s: &str) -> Option<(Tag, usize)> {
        let bytes = s.as_bytes();
        let mut i = 1;
        let end = bytes.get(i) == Some(&b'/');
        i += usize::from(end);
        let first = *bytes.get(i)?;
        if !(first.is_ascii_alphabetic() || first == b'!' || first == b'?') {
            return None;
        }
        let name_len = bytes[i..]
            .iter()
            .take_while(|b| !(b.is_ascii_whitespace() || **b == b'>' || **b == b'/'))
            .count();
        let name = s[i..i + name_len].to_ascii_lowercase();
        i += name_len;
        let mut attrs = Vec::new();
        loop {
            while bytes
                .get(i)
                .is_some_and(|b| b.is_ascii_whitespace() || *b == b'/')
            {
                i += 1;
            }
            match bytes.get(i)? {
                b'>' => break,
                _ => {
                    let key_len = bytes[i..]
                        .iter()
                        .take_while(|b| !(b.is_ascii_whitespace() || b"=>/".contains(b)))
                        .count()
                        .max(1);
                    let key = s[i..i + key_len].to_ascii_lowercase();
                    i += key_len;
                    while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
                        i += 1;
                    }
                    let mut value = String::new();
                    if bytes.get(i) == Some(&b'=') {
                        i += 1;
                        while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
                            i += 1;
                        }
                        let raw = match bytes.get(i)? {
                            q @ (b'"' | b'\'') => {
                                let close = s[i + 1..].find(*q as char)?;
                                let raw = &s[i + 1..i + 1 + close];
                                i += close + 2;
                                raw
                            }
                            _ => {
                                let len = bytes[i..]
                                    .iter()
                                    .take_while(|b| !(b.is_ascii_whitespace() || **b == b'>'))
                                    .count();
                                let raw = &s[i..i + len];
                                i += len;
                                raw
                            }
                        };
                        value = decode_entities(raw);
                    }
                    attrs.push((key, value));
                }
            }
        }
        Some((Tag { name, end, attrs }, i + 1))
    }

    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Writer {
    out: String,
    /// Inside an element whose content is not shown, until its end tag.
    skipping: Option<&'static str>,
    /// Open links: each one's target and where its text starts in `out`.
    links: Vec<(Option<String>, usize)>,
    /// Open lists: the next number of an `ol`, None for a `ul`.
    lists: Vec<Option<u32>>,
    preformatted: usize,
}

impl Writer {
    fn text(&mut self, raw: &str) {
        if raw.is_empty() || self.skipping.is_some() {
            return;
        }
        let text = decode_entities(raw);
        if self.preformatted > 0 {
            self.out.push_str(&text);
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                if !(self.out.is_empty() || self.out.ends_with([' ', '\n'])) {
                    self.out.push(' ');
                }
            } else {
                self.out.push(c);
            }
        }
    }

    fn tag(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        if let Some(hidden) = HIDDEN.iter().find(|h| **h == name) {
            if !tag.end {
                self.skipping = Some(*hidden);
            }
            return;
        }
        if PARAGRAPHS.contains(&name) {
            self.blank_line();
        } else if LINES.contains(&name) {
            self.new_line();
        }
        match (name, tag.end) {
            ("br", _) => {
                self.trim_spaces();
                self.out.push('\n');
            }
            ("pre", false) => self.preformatted += 1,
            ("pre", true) => self.preformatted = self.preformatted.saturating_sub(1),
            ("ul", false) => self.lists.push(None),
            ("ol", false) => self.lists.push(Some(1)),
            ("ul" | "ol", true) => {
                self.lists.pop();
            }
            ("li", false) => {
                self.new_line();
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    _ => "- ".to_owned(),
                };
                self.out.push_str(&indent);
                self.out.push_str(&marker);
            }
            ("li", true) => self.new_line(),
            ("td" | "th", false) if !(self.out.is_empty() || self.out.ends_with([' ', '\n'])) => {
                self.out.push(' ');
            }
            ("img", false) => {
                if let Some(alt) = tag.attr("alt").filter(|a| !a.trim().is_empty()) {
                    self.text(alt);
                }
            }
            ("a", false) => {
                let href = tag.attr("href").map(|h| h.trim().to_owned());
                self.links.push((href, self.out.len()));
            }
            ("a", true) => {
                if let Some((href, start)) = self.links.pop() {
                    self.close_link(href, start);
                }
            }
            _ => {}
        }
    }

    /// Writes a link's target after its text, unless the text already says it.
    fn close_link(&mut self, href: Option<String>, start: usize) {
        let Some(href) = href else { return };
        let target = if let Some(address) = href.strip_prefix("mailto:") {
            address.split('?').next().unwrap_or_default().to_owned()
        } else if href.starts_with("http://") || href.starts_with("https://") {
            href
        } else {
            return;
        };
        let text = self.out.get(start..).unwrap_or_default().trim();
        if text.is_empty() {
            self.out.push_str(&target);
        } else if text != target && text.trim_end_matches('/') != target.trim_end_matches('/') {
            self.trim_spaces();
            self.out.push_str(&format!(" ({target})"));
        }
    }

    fn trim_spaces(&mut self) {
        while self.out.ends_with(' ') {
            self.out.pop();
        }
    }

    fn new_line(&mut self) {
        self.trim_spaces();
        if !(self.out.is_empty() || self.out.ends_with('\n')) {
            self.out.push('\n');
        }
    }

    fn blank_line(&mut self) {
        self.new_line();
        if !(self.out.is_empty() || self.out.ends_with("\n\n")) {
            self.out.push('\n');
        }
    }

    fn finish(self) -> String {
        let mut text = String::with_capacity(self.out.len());
        let mut blank = 0;
        for line in self.out.lines().map(str::trim_end) {
            if line.trim().is_empty() {
                blank += 1;
                continue;
            }
            if !text.is_empty() {
                text.push_str(if blank > 0 { "\n\n" } else { "\n" });
            }
            blank = 0;
            text.push_str(line);
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text
    }
}

/// `&amp;`, `&#39;`, `&#x2F;` and the named entities mail commonly uses; any other `&`
/// stays as it is.
fn decode_entities(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest[1..].find(';').filter(|e| *e <= 10).map(|e| e + 1);
        let decoded = end.and_then(|e| entity(&rest[1..e]));
        match (decoded, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| !c.is_control() || c.is_whitespace());
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "deg" => '°',
        "times" => '×',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::from_html;

    #[test]
    fn paragraphs_lists_and_breaks_become_lines() {
        let html =
            "<h1>Your order</h1><p>Thanks,\n   Ada &amp; co.</p><ul><li>One</li><li>Two</li></ul>\
                    <ol><li>First</li><li>Second</li></ol><p>a<br>b</p>";
        assert_eq!(
            from_html(html),
            "Your order\n\nThanks, Ada & co.\n\n- One\n- Two\n\n1. First\n2. Second\n\na\nb\n"
        );
    }

    #[test]
    fn links_keep_their_target_after_their_text() {
        let html = "<p>See <a href=\"https:&#x2F;&#x2F;acme.test&#x2F;o?a=1&amp;b=2\">your order</a>, \
                    <a href='https://acme.test'>https://acme.test/</a>, \
                    <a href=\"mailto:help@acme.test?subject=hi\">write to us</a>, \
                    <a href=\"#top\">top</a> and <a href=\"https://acme.test/x\"><img src=\"x.png\" alt=\"\"></a>.</p>";
        assert_eq!(
            from_html(html),
            "See your order (https://acme.test/o?a=1&b=2), https://acme.test/, \
             write to us (help@acme.test), top and https://acme.test/x.\n"
        );
    }

    #[test]
    fn the_head_styles_scripts_comments_and_the_open_pixel_are_not_text() {
        let html = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>T</title>\
                    <style>p { color: red }</style></head><body><!-- note --><p>Hi</p>\
                    <script>alert(1)</script><img src=\"https://x/t/o/abc\" width=\"1\" height=\"1\" alt=\"\">\
                    <img src=\"logo.png\" alt=\"Acme\"></body></html>";
        assert_eq!(from_html(html), "Hi\n\nAcme\n");
    }

    #[test]
    fn what_is_not_html_passes_through_as_text() {
        assert_eq!(
            from_html("1 < 2 & 3 > 2 &bogus; &#99999999;"),
            "1 < 2 & 3 > 2 &bogus; &#99999999;\n"
        );
        assert_eq!(
            from_html("<p>unclosed <a href=\"x"),
            "unclosed <a href=\"x\n"
        );
        assert_eq!(from_html(""), "");
        assert_eq!(from_html("<pre>a\n  b</pre>"), "a\n  b\n");
    }
}
