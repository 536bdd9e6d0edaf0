//! The HTML document an email's body goes out in. Templates are usually fragments
//! (`<p>Hi {{name}}</p>`); mail clients and filters expect a whole document with its
//! character set declared (SpamAssassin scores HTML without an `<html>` tag). The open
//! pixel and unsubscribe footer, added at the end of a fragment when it is rendered, so
//! land inside the `<body>`. A body that is a document already is the tenant's to shape
//! and goes out as it is. Wrapped when the message is built, not stored: the email's
//! record keeps what the template rendered.
//!
//! The head is the usual email boilerplate, and its size is no accident: SpamAssassin's
//! HTML_IMAGE_ONLY_* rules score any HTML part shorter than 3,200 bytes that has an
//! image in it (the open pixel is one) 0.6 to 2.8 points, whatever its text, so a
//! tracked email of a few paragraphs needs the document around it to stay clear.

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
    out.push_str("</title>\n");
    out.push_str(STYLE);
    out.push_str("</head>\n<body>\n");
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

/// The head that mail clients read: UTF-8, a viewport for phones, no reformatting or
/// auto-linking by Apple Mail, light and dark schemes, and Outlook's 96 DPI setting
/// (without it Outlook on high-DPI screens scales images wrongly).
const HEAD: &str = r#"<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="X-UA-Compatible" content="IE=edge">
<meta name="x-apple-disable-message-reformatting">
<meta name="format-detection" content="telephone=no, date=no, address=no, email=no, url=no">
<meta name="color-scheme" content="light dark">
<meta name="supported-color-schemes" content="light dark">
<!--[if mso]>
<noscript>
<xml>
<o:OfficeDocumentSettings>
<o:AllowPNG/>
<o:PixelsPerInch>96</o:PixelsPerInch>
</o:OfficeDocumentSettings>
</xml>
</noscript>
<![endif]-->
"#;

/// Resets for the quirks of common clients that leave the tenant's own styling alone:
/// no margin around the message, no text inflation on phones, no gaps Outlook adds
/// around tables and cells, images that scale down and never show a border, links that
/// iOS, Gmail and Yahoo detect (dates, numbers) keeping the text's look, Gmail's
/// download button off images, Outlook.com's line heights, and superscripts that Outlook
/// would shrink twice. Last, the look of the unsubscribe footer that marketing mail gets
/// (`mailroom-footer`): a rule above it, and colours and spacing for dark mode and
/// phones. With it the document is about 3,000 bytes before its content, and a tracked
/// email adds its open pixel and unsubscribe link (about 300 more), so even a one-line
/// tracked email is past SpamAssassin's HTML_IMAGE_ONLY_* sizes (see the module's comment).
const STYLE: &str = r#"<style>
html, body { margin: 0 auto !important; padding: 0 !important; width: 100% !important; }
* { -ms-text-size-adjust: 100%; -webkit-text-size-adjust: 100%; }
div[style*="margin: 16px 0"] { margin: 0 !important; }
#MessageViewBody, #MessageWebViewDiv { width: 100% !important; }
table, td { mso-table-lspace: 0pt !important; mso-table-rspace: 0pt !important; }
img { -ms-interpolation-mode: bicubic; border: 0; outline: none; max-width: 100%; }
a[x-apple-data-detectors], .unstyle-auto-detected-links a, .aBn {
  border-bottom: 0 !important; cursor: default !important; color: inherit !important;
  text-decoration: none !important; font-size: inherit !important;
  font-family: inherit !important; font-weight: inherit !important;
  line-height: inherit !important;
}
u + #body a, #MessageViewBody a {
  color: inherit; text-decoration: none; font-size: inherit;
  font-family: inherit; font-weight: inherit; line-height: inherit;
}
.a6S { display: none !important; opacity: 0.01 !important; }
.im { color: inherit !important; }
img.g-img + div { display: none !important; }
:root { color-scheme: light dark; supported-color-schemes: light dark; }
#outlook a { padding: 0; }
.ReadMsgBody, .ExternalClass { width: 100%; }
.ExternalClass, .ExternalClass p, .ExternalClass span, .ExternalClass font,
.ExternalClass td, .ExternalClass div { line-height: 100%; }
a[href^="tel"], a[href^="sms"] { color: inherit; text-decoration: none; }
.yshortcuts a { border-bottom: none !important; }
</style>
<!--[if mso]>
<style>
table { border-collapse: collapse; border-spacing: 0; }
div, td { padding: 0; }
div { margin: 0 !important; }
sup, sub { font-size: 100% !important; }
</style>
<![endif]-->
<style>
.mailroom-footer { margin: 24px 0 8px; padding: 16px 0 0; border-top: 1px solid #e5e5e5; }
.mailroom-footer a { color: #888888 !important; text-decoration: underline; }
@media (prefers-color-scheme: dark) {
  .mailroom-footer { border-top-color: #444444; }
  .mailroom-footer, .mailroom-footer a { color: #aaaaaa !important; }
}
@media only screen and (max-width: 480px) {
  .mailroom-footer { margin: 16px 8px 4px; font-size: 13px !important; }
}
</style>
"#;

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
