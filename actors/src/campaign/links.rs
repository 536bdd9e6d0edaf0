//! Signed links in marketing mail: unsubscribe (API.md section 9, RFC 8058), the open
//! pixel and click redirects.
//!
//! A token is `base64url(payload || mac)`: the payload names the project and what the
//! link is about (a contact and campaign; an email; an email and its target URL), and the
//! mac is the first 16 bytes of HMAC-SHA256 over it with the server's link key (made at
//! first start, kept in the store). So ids cannot be guessed or enumerated, a click can
//! only go where the email's own link went (never an open redirect), and a token changed
//! in one character, or signed by another server, reads as nothing (404).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::Result;
use crate::model::{CampaignId, ContactId, EmailId, ProjectId};
use crate::store::{keys, Batch, Store};

type HmacSha256 = Hmac<Sha256>;

const MAC_LEN: usize = 16;
/// Links to longer URLs are left as they are (not tracked): a token carries its URL.
const MAX_TRACKED_URL: usize = 2_048;

/// What a valid token stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Unsubscribe {
        project: ProjectId,
        contact: ContactId,
        campaign: Option<CampaignId>,
    },
    Open {
        project: ProjectId,
        email: EmailId,
    },
    Click {
        project: ProjectId,
        email: EmailId,
        url: String,
    },
}

/// What one marketing email's links are made from.
#[derive(Debug, Clone, Copy)]
pub struct LinkTarget {
    pub project: ProjectId,
    pub contact: ContactId,
    pub email: EmailId,
    pub campaign: Option<CampaignId>,
}

pub struct Links {
    key: [u8; 32],
    public_url: String,
    tracking: bool,
}

impl Links {
    pub fn new(key: [u8; 32], public_url: &str, tracking: bool) -> Self {
        Links {
            key,
            public_url: public_url.trim_end_matches('/').to_owned(),
            tracking,
        }
    }

    /// The server's link key: read from the store, or made and stored at first start.
    pub fn load_key(store: &dyn Store) -> Result<[u8; 32]> {
        if let Some(k) = store.get(keys::LINK_KEY)? {
            if let Ok(key) = <[u8; 32]>::try_from(k.as_slice()) {
                return Ok(key);
            }
            tracing::error!(
                "the stored link key is malformed; making a new one (old links stop working)"
            );
        }
        let key: [u8; 32] = rand::random();
        let mut batch = Batch::new();
        batch.put(keys::LINK_KEY.to_vec(), key.to_vec());
        store.apply(batch)?;
        Ok(key)
    }

    fn mac(&self, payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(payload);
        mac
    }

    fn sign(&self, payload: Vec<u8>) -> String {
        let tag = self.mac(&payload).finalize().into_bytes();
        let mut bytes = payload;
        bytes.extend_from_slice(&tag[..MAC_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// What a token stands for, if this server signed it.
    pub fn read(&self, token: &str) -> Option<Link> {
        if token.len() > 4 * MAX_TRACKED_URL {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        let split = bytes.len().checked_sub(MAC_LEN)?;
        let (payload, tag) = bytes.split_at(split);
        self.mac(payload).verify_truncated_left(tag).ok()?;
        let (&kind, rest) = payload.split_first()?;
        let id = |at: usize| -> Option<[u8; 16]> { rest.get(at..at + 16)?.try_into().ok() };
        let project = keys::id_after(&id(0)?, b"")?;
        match kind {
            b'u' if rest.len() == 48 => {
                let campaign = id(32)?;
                Some(Link::Unsubscribe {
                    project,
                    contact: keys::id_after(&id(16)?, b"")?,
                    campaign: (campaign != [0; 16])
                        .then(|| keys::id_after(&campaign, b""))
                        .flatten(),
                })
            }
            b'o' if rest.len() == 32 => Some(Link::Open {
                project,
                email: keys::id_after(&id(16)?, b"")?,
            }),
            b'c' if rest.len() > 32 => Some(Link::Click {
                project,
                email: keys::id_after(&id(16)?, b"")?,
                url: String::from_utf8(rest[32..].to_vec()).ok()?,
            }),
            _ => None,
        }
    }

    pub fn unsubscribe_url(&self, t: &LinkTarget) -> String {
        let mut payload = vec![b'u'];
        payload.extend_from_slice(t.project.as_bytes());
        payload.extend_from_slice(t.contact.as_bytes());
        payload.extend_from_slice(t.campaign.as_ref().map_or(&[0; 16], |c| c.as_bytes()));
        format!("{}/unsubscribe/{}", self.public_url, self.sign(payload))
    }

    fn open_url(&self, t: &LinkTarget) -> String {
        let mut payload = vec![b'o'];
        payload.extend_from_slice(t.project.as_bytes());
        payload.extend_from_slice(t.email.as_bytes());
        format!("{}/t/o/{}", self.public_url, self.sign(payload))
    }

    fn click_url(&self, t: &LinkTarget, url: &str) -> String {
        let mut payload = vec![b'c'];
        payload.extend_from_slice(t.project.as_bytes());
        payload.extend_from_slice(t.email.as_bytes());
        payload.extend_from_slice(url.as_bytes());
        format!("{}/t/c/{}", self.public_url, self.sign(payload))
    }

    /// A rendered marketing email's HTML as it is sent, `unsubscribe` being its
    /// `unsubscribe_url`: with an unsubscribe footer unless the rendered body shows that
    /// link itself (through `{{unsubscribeUrl}}`; a mention that renders nothing does not
    /// count), and, when tracking is on, its web links going through click redirects and
    /// an open pixel.
    pub fn decorate(&self, html: &str, t: &LinkTarget, unsubscribe: &str) -> String {
        // Templates escape what they print into HTML: `/` as `&#x2F;`.
        let footer =
            !(html.contains(unsubscribe) || html.contains(&unsubscribe.replace('/', "&#x2F;")));
        let mut out = if self.tracking {
            self.track_links(html, t, unsubscribe)
        } else {
            html.to_owned()
        };
        let mut tail = String::new();
        if footer {
            tail.push_str(&format!(
                "<p style=\"font-size:12px;color:#888;text-align:center\">\
                 <a href=\"{unsubscribe}\" style=\"color:#888\">Unsubscribe</a></p>"
            ));
        }
        if self.tracking {
            tail.push_str(&format!(
                "<img src=\"{}\" width=\"1\" height=\"1\" alt=\"\" style=\"display:none\">",
                self.open_url(t)
            ));
        }
        match find_ascii_ci(&out, "</body>") {
            Some(at) => out.insert_str(at, &tail),
            None => out.push_str(&tail),
        }
        out
    }

    /// Rewrites each `href="http(s)://..."` (either quote) to its click redirect; the
    /// unsubscribe link stays direct.
    fn track_links(&self, html: &str, t: &LinkTarget, unsubscribe: &str) -> String {
        let mut out = String::with_capacity(html.len() + 256);
        let mut rest = html;
        while let Some(at) = find_ascii_ci(rest, "href=") {
            let value_at = at + 5;
            let quote = rest[value_at..].chars().next();
            let Some(q @ ('"' | '\'')) = quote else {
                out.push_str(&rest[..value_at]);
                rest = &rest[value_at..];
                continue;
            };
            let start = value_at + 1;
            let Some(len) = rest[start..].find(q) else {
                break;
            };
            let raw = &rest[start..start + len];
            let url = unescape_attribute(raw);
            // Only plain web links: a URL with spaces, controls or non-ASCII letters is
            // left as it is (a Location header could not carry it as signed).
            let web = (url.starts_with("http://") || url.starts_with("https://"))
                && url.bytes().all(|b| b.is_ascii_graphic());
            out.push_str(&rest[..start]);
            if web && url != unsubscribe && url.len() <= MAX_TRACKED_URL {
                out.push_str(&self.click_url(t, &url));
            } else {
                out.push_str(raw);
            }
            rest = &rest[start + len..];
        }
        out.push_str(rest);
        out
    }
}

/// An attribute value as a browser reads it. Templates escape what they print into
/// HTML (`{{unsubscribeUrl}}` becomes `https:&#x2F;&#x2F;...`), so a link is compared
/// and redirected to as the reader would see it.
fn unescape_attribute(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_owned();
    }
    raw.replace("&#x2F;", "/")
        .replace("&#x2f;", "/")
        .replace("&#47;", "/")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Where `needle` (ASCII) first occurs in `hay`, ignoring ASCII case.
fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    (0..=h.len().checked_sub(n.len())?).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Links {
        Links::new([9; 32], "https://mail.example.com/", true)
    }

    fn target() -> LinkTarget {
        LinkTarget {
            project: ProjectId::new(),
            contact: ContactId::new(),
            email: EmailId::new(),
            campaign: Some(CampaignId::new()),
        }
    }

    fn token(url: &str) -> &str {
        url.rsplit('/').next().unwrap()
    }

    #[test]
    fn an_unsubscribe_token_reads_back_and_a_changed_one_does_not() {
        let (l, t) = (links(), target());
        let url = l.unsubscribe_url(&t);
        assert!(url.starts_with("https://mail.example.com/unsubscribe/"));
        let expected = Link::Unsubscribe {
            project: t.project,
            contact: t.contact,
            campaign: t.campaign,
        };
        assert_eq!(l.read(token(&url)), Some(expected));
        let mut bad = token(&url).to_owned().into_bytes();
        bad[10] = if bad[10] == b'A' { b'B' } else { b'A' };
        assert_eq!(l.read(std::str::from_utf8(&bad).unwrap()), None);
        let other = Links::new([8; 32], "https://mail.example.com", true);
        assert_eq!(other.read(token(&url)), None, "another server's key");
        assert_eq!(l.read("not a token"), None);
    }

    #[test]
    fn links_go_through_redirects_that_carry_their_target() {
        let (l, t) = (links(), target());
        let html = "<body><a HREF=\"https://x.example/a?b=1&amp;c=2\">x</a> \
                    <a href='mailto:a@b.c'>m</a></body>";
        let out = l.decorate(html, &t, &l.unsubscribe_url(&t));
        assert!(!out.contains("https://x.example"), "{out}");
        assert!(out.contains("href='mailto:a@b.c'"));
        let click = out
            .split("/t/c/")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(
            l.read(click),
            Some(Link::Click {
                project: t.project,
                email: t.email,
                url: "https://x.example/a?b=1&c=2".into()
            })
        );
        assert!(out.contains("/t/o/") && out.contains("/unsubscribe/"));
        assert!(
            out.ends_with("</body>"),
            "the footer goes inside the body: {out}"
        );
    }

    #[test]
    fn an_unsubscribe_link_the_template_escaped_stays_direct() {
        let (l, t) = (links(), target());
        let escaped = l.unsubscribe_url(&t).replace('/', "&#x2F;");
        let html = format!("<a href=\"{escaped}\">leave</a>");
        let out = l.decorate(&html, &t, &l.unsubscribe_url(&t));
        assert!(out.contains(&escaped), "{out}");
        assert!(!out.contains("/t/c/"), "{out}");
        assert!(
            !out.contains("Unsubscribe</a>"),
            "no footer when the body has the link"
        );
    }
}
