//! The HTML document an email's body goes out in. Templates are usually fragments
//! (`<p>Hi {{name}}</p>`); mail clients and filters expect a whole document with its
//! character set declared (SpamAssassin scores HTML without an `<html>` tag). The open
//! pixel and unsubscribe footer, added at the end of a fragment when it is rendered, so
//! land inside the `<body>`. A body that is a document already is the tenant's to shape
//! and goes out as it is. Wrapped when the message is built, not stored: the email's
//! record keeps what the template rendered.

/// `html` inside a document whose title is `subject`, unless it has an `<html>` or
/// `<body>` tag of its own.
pub fn wrap(html: &str, subject: &str) -> String {
    if is_document(html) {
        return html.to_owned();
    }
    let mut out = String::with_capacity(HEAD.len() + html.len() + 256);
    out.push_str(HEAD);
    out.push_str("<title>");
    out.push_str(&escape(subject));
    out.push_str("</title>\n</head>\n<body>\n");
    out.push_str(html);
    out.push_str("\n</body>\n</html>\n");
    out
}

/// Whether `html` opens an `<html>` or `<body>` element (any case, with or without
/// attributes).
pub fn is_document(html: &str) -> bool {
    let lower = html.to_ascii_lowercase();
    ["<html", "<body"].iter().any(|open| {
        lower.match_indices(open).any(|(at, _)| {
            matches!(
                lower.as_bytes().get(at + open.len()),
                Some(b'>' | b' ' | b'\t' | b'\r' | b'\n' | b'/')
            )
        })
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The head that mail clients read: UTF-8, a viewport for phones, and no reformatting
/// of the text by Apple Mail.
const HEAD: &str = "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"x-apple-disable-message-reformatting\">\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_goes_into_the_body_of_a_utf8_document() {
        let doc = wrap("<p>Hi</p>", "Tom & <Jerry>");
        assert!(doc.starts_with("<!DOCTYPE html>\n<html"), "{doc}");
        assert!(doc.contains("<meta charset=\"utf-8\">"));
        assert!(doc.contains("<title>Tom &amp; &lt;Jerry&gt;</title>"));
        let body = doc.split("<body>").nth(1).unwrap();
        assert!(body.contains("<p>Hi</p>") && body.contains("</body>"));
    }

    #[test]
    fn a_document_goes_out_as_it_is() {
        for html in [
            "<HTML><body>x</body></HTML>",
            "<html lang=\"en\">x</html>",
            "<body style=\"x\">y</body>",
        ] {
            assert_eq!(wrap(html, "s"), html);
        }
        assert!(!is_document("<p>an <htmlish> tag, a <bodyguard></p>"));
    }
}
