//! Signed links in marketing mail: unsubscribe (API.md section 9, RFC 8058), the open
//! pixel and click redirects.
//!
//! A token (see `token`) carries the project and what the link is about (a contact and
//! campaign; an email; an email and its target URL), encrypted, and signed with the
//! project's link key of the generation it was made under. So ids are neither shown nor
//! guessable, a click can only go where the email's own link went (never an open
//! redirect), and a token changed in one character, or made by another server, reads as
//! nothing (404). What a valid token still does depends on its project now: see
//! `resolve`.

use crate::error::Result;
use crate::model::{CampaignId, ContactId, EmailId, ProjectId, Timestamp};
use crate::store::{keys, Batch, Store};

use super::token::{Issue, Made, Sealer, HEAD_LEN};
use crate::link_generation;

/// Links to longer URLs are left as they are (not tracked): a token carries its URL.
const MAX_TRACKED_URL: usize = 2_048;
const DAY_MS: i64 = 86_400_000;
/// The head of a token in the format before generations: kind and project.
const LEGACY_HEAD_LEN: usize = 1 + 16;

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

impl Link {
    pub fn project(&self) -> ProjectId {
        match self {
            Link::Unsubscribe { project, .. }
            | Link::Open { project, .. }
            | Link::Click { project, .. } => *project,
        }
    }
}

/// A valid token, and whether it still does what it says: an unsubscribe link that
/// unsubscribes, an open that is recorded, a click that is recorded and redirected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub link: Link,
    pub live: bool,
}

/// What one marketing email's links are made from.
#[derive(Debug, Clone, Copy)]
pub struct LinkTarget {
    pub project: ProjectId,
    pub contact: ContactId,
    pub email: EmailId,
    pub campaign: Option<CampaignId>,
    pub issue: Issue,
}

pub struct Links {
    sealer: Sealer,
    public_url: String,
    tracking: bool,
    unsubscribe_valid_days: u32,
    /// `feedback.sender_id`: the last part of every `Feedback-ID`.
    sender_id: String,
}

fn day_of(t: Timestamp) -> u32 {
    u32::try_from(t.millis().div_euclid(DAY_MS)).unwrap_or(0)
}

impl Links {
    /// `secret` is the server's link key; an unsubscribe link made under a rotated-away
    /// generation works `unsubscribe_valid_days` after the day it was made.
    pub fn new(
        secret: [u8; 32],
        public_url: &str,
        tracking: bool,
        unsubscribe_valid_days: u32,
    ) -> Self {
        Links {
            sealer: Sealer::new(secret),
            public_url: public_url.trim_end_matches('/').to_owned(),
            tracking,
            unsubscribe_valid_days,
            sender_id: "mailroom".into(),
        }
    }

    /// For the engine's unit tests: a fixed key, pointing nowhere that answers.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Links::new([7; 32], "http://127.0.0.1:9", false, 60)
    }

    /// Names the sender in `Feedback-ID` headers (`feedback.sender_id`).
    pub fn with_sender_id(mut self, id: &str) -> Self {
        let id: String = id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        if !id.is_empty() {
            self.sender_id = id;
        }
        self
    }

    /// `Feedback-ID` (Gmail's feedback loop reports complaints per its fields) and, for
    /// list mail, `List-Id` (`<project>.<public host>`): what bulk mail carries.
    /// `kind` is `campaign` or `workflow`, `id` the campaign's or the workflow's.
    pub fn list_headers(
        &self,
        project: ProjectId,
        kind: &str,
        id: &str,
        list: bool,
    ) -> Vec<(String, String)> {
        let mut out = vec![(
            "Feedback-ID".to_owned(),
            format!("{id}:{project}:{kind}:{}", self.sender_id),
        )];
        if list {
            let host = self
                .public_url
                .split("://")
                .nth(1)
                .unwrap_or(&self.public_url)
                .split(['/', ':'])
                .next()
                .unwrap_or("localhost");
            out.push(("List-Id".to_owned(), format!("<{project}.{host}>")));
        }
        out
    }

    /// The server's link key: read from the store, or made and stored at first start.
    pub fn load_key(store: &dyn Store) -> Result<[u8; 32]> {
        let fresh: [u8; 32] = rand::random();
        // Nodes starting at once on a new database each make a key: one must win, or
        // links one node signs fail on the others.
        let stored = store.put_if_absent(keys::LINK_KEY, &fresh)?;
        if let Ok(key) = <[u8; 32]>::try_from(stored.as_slice()) {
            return Ok(key);
        }
        tracing::error!(
            "the stored link key is malformed; making a new one (old links stop working)"
        );
        let mut batch = Batch::new();
        batch.put(keys::LINK_KEY.to_vec(), fresh.to_vec());
        store.apply(batch)?;
        Ok(fresh)
    }

    /// What links of `project` made at `now` carry: its current generation and the day.
    pub fn issue(store: &dyn Store, project: ProjectId, now: Timestamp) -> Result<Issue> {
        Ok(Issue {
            generation: link_generation::load(store, project)?.generation,
            day: day_of(now),
        })
    }

    /// What a token stands for, if this server made it.
    pub fn read(&self, token: &str) -> Option<(Link, Made)> {
        if token.len() > 4 * MAX_TRACKED_URL {
            return None;
        }
        let (payload, made) = self.sealer.open(token)?;
        let head = match made {
            Made::Sealed(_) => HEAD_LEN,
            Made::Legacy => LEGACY_HEAD_LEN,
        };
        Some((parse(&payload, head)?, made))
    }

    /// What a token does now. Clicks and opens work while their project is enabled and
    /// signs with the generation they were made under: a disabled project's, or one made
    /// before `rotate-keys`, is neither recorded nor redirected. An unsubscribe link
    /// works under its own generation whatever befalls the project (a recipient's right
    /// to leave does not end with the sender's account), and after a rotation for
    /// `unsubscribe_valid_days` from the day it was made (one in the format before
    /// generations, from the first rotation). None: not a token of this server.
    pub fn resolve(
        &self,
        store: &dyn Store,
        token: &str,
        now: Timestamp,
    ) -> Result<Option<Resolved>> {
        let Some((link, made)) = self.read(token) else {
            return Ok(None);
        };
        let state = link_generation::load(store, link.project())?;
        let within_days = |day: u32| {
            i64::from(day_of(now)) <= i64::from(day) + i64::from(self.unsubscribe_valid_days)
        };
        let live = match (&link, made) {
            (Link::Unsubscribe { .. }, Made::Sealed(issue)) => {
                issue.generation == state.generation || within_days(issue.day)
            }
            (Link::Unsubscribe { .. }, Made::Legacy) => {
                state.generation == 0
                    || state
                        .first_rotated_at
                        .is_some_and(|at| within_days(day_of(Timestamp::from(at))))
            }
            (_, made) => {
                let generation = match made {
                    Made::Sealed(issue) => issue.generation,
                    Made::Legacy => 0,
                };
                generation == state.generation
                    && !crate::directory::is_disabled(store, link.project())
            }
        };
        Ok(Some(Resolved { link, live }))
    }

    pub fn unsubscribe_url(&self, t: &LinkTarget) -> String {
        let campaign = t.campaign.as_ref().map_or(&[0; 16], |c| c.as_bytes());
        let token = self
            .sealer
            .seal(b'u', t.project, t.issue, &[t.contact.as_bytes(), campaign]);
        format!("{}/unsubscribe/{token}", self.public_url)
    }

    fn open_url(&self, t: &LinkTarget) -> String {
        let token = self
            .sealer
            .seal(b'o', t.project, t.issue, &[t.email.as_bytes()]);
        format!("{}/t/o/{token}", self.public_url)
    }

    fn click_url(&self, t: &LinkTarget, url: &str) -> String {
        let token = self.sealer.seal(
            b'c',
            t.project,
            t.issue,
            &[t.email.as_bytes(), url.as_bytes()],
        );
        format!("{}/t/c/{token}", self.public_url)
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
                "<p class=\"mailroom-footer\" style=\"font-size:12px;color:#888;text-align:center\">\
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

/// A link from a token's payload, whose kind and project come first and what the link is
/// about from `head` on.
fn parse(payload: &[u8], head: usize) -> Option<Link> {
    let id =
        |bytes: &[u8], at: usize| -> Option<[u8; 16]> { bytes.get(at..at + 16)?.try_into().ok() };
    let (&kind, _) = payload.split_first()?;
    let project = keys::id_after(&id(payload, 1)?, b"")?;
    let rest = payload.get(head..)?;
    match kind {
        b'u' if rest.len() == 32 => {
            let campaign = id(rest, 16)?;
            Some(Link::Unsubscribe {
                project,
                contact: keys::id_after(&id(rest, 0)?, b"")?,
                campaign: (campaign != [0; 16])
                    .then(|| keys::id_after(&campaign, b""))
                    .flatten(),
            })
        }
        b'o' if rest.len() == 16 => Some(Link::Open {
            project,
            email: keys::id_after(&id(rest, 0)?, b"")?,
        }),
        b'c' if rest.len() > 16 => Some(Link::Click {
            project,
            email: keys::id_after(&id(rest, 0)?, b"")?,
            url: String::from_utf8(rest[16..].to_vec()).ok()?,
        }),
        _ => None,
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
    use crate::directory::Projects;
    use crate::store::SledStore;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use std::sync::Arc;

    const VALID_DAYS: u32 = 60;

    fn links() -> Links {
        Links::new([9; 32], "https://mail.example.com/", true, VALID_DAYS)
    }

    fn target() -> LinkTarget {
        LinkTarget {
            project: ProjectId::new(),
            contact: ContactId::new(),
            email: EmailId::new(),
            campaign: Some(CampaignId::new()),
            issue: Issue {
                generation: 0,
                day: 20_000,
            },
        }
    }

    fn token(url: &str) -> &str {
        url.rsplit('/').next().unwrap()
    }

    /// The token of the first link in `html` whose path starts with `marker`.
    fn token_after<'a>(html: &'a str, marker: &str) -> &'a str {
        html.split(marker)
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
    }

    fn link(l: &Links, token: &str) -> Option<Link> {
        l.read(token).map(|(link, _)| link)
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
        assert_eq!(l.read(token(&url)), Some((expected, Made::Sealed(t.issue))));
        let mut bad = token(&url).to_owned().into_bytes();
        bad[10] = if bad[10] == b'A' { b'B' } else { b'A' };
        assert_eq!(l.read(std::str::from_utf8(&bad).unwrap()), None);
        let other = Links::new([8; 32], "https://mail.example.com", true, VALID_DAYS);
        assert_eq!(other.read(token(&url)), None, "another server's key");
        assert_eq!(l.read("not a token"), None);
        assert_eq!(l.read(""), None);
    }

    #[test]
    fn a_token_shows_no_id_and_the_same_link_always_gives_the_same_token() {
        let (l, t) = (links(), target());
        let url = "https://x.example/a";
        let html = format!("<a href=\"{url}\">x</a>");
        let unsubscribe = l.unsubscribe_url(&t);
        let out = l.decorate(&html, &t, &unsubscribe);
        assert_eq!(unsubscribe, l.unsubscribe_url(&t), "made twice per email");
        let click = token_after(&out, "/t/c/");
        let pixel = token_after(&out, "/t/o/");
        for token in [token(&unsubscribe), click, pixel] {
            let bytes = URL_SAFE_NO_PAD.decode(token).unwrap();
            let ids: [&[u8]; 4] = [
                t.project.as_bytes(),
                t.contact.as_bytes(),
                t.email.as_bytes(),
                t.campaign.as_ref().unwrap().as_bytes(),
            ];
            for id in ids {
                // Half an id is enough to give it away.
                assert!(
                    !bytes.windows(8).any(|w| id.windows(8).any(|i| i == w)),
                    "{token} shows an id"
                );
            }
            assert!(!bytes.windows(url.len()).any(|w| w == url.as_bytes()));
            assert!(token.len() < 200 + url.len(), "{} characters", token.len());
        }
    }

    #[test]
    fn links_go_through_redirects_that_carry_their_target() {
        let (l, t) = (links(), target());
        let html = "<body><a HREF=\"https://x.example/a?b=1&amp;c=2\">x</a> \
                    <a href='mailto:a@b.c'>m</a></body>";
        let out = l.decorate(html, &t, &l.unsubscribe_url(&t));
        assert!(!out.contains("https://x.example"), "{out}");
        assert!(out.contains("href='mailto:a@b.c'"));
        let click = token_after(&out, "/t/c/");
        assert_eq!(
            link(&l, click),
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

    /// A store with one project, and the links of one of its emails made at `day`.
    struct Rig {
        _dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        projects: Projects,
        links: Links,
        target: LinkTarget,
    }

    fn rig(day: u32) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = SledStore::open(dir.path(), 8 << 20).unwrap();
        let projects = Projects::new(store.clone());
        let project = projects
            .create("Acme", Timestamp::from(0))
            .unwrap()
            .project
            .id;
        let at = Timestamp::from(i64::from(day) * DAY_MS);
        let target = LinkTarget {
            project,
            issue: Links::issue(&*store, project, at).unwrap(),
            ..target()
        };
        Rig {
            _dir: dir,
            store,
            projects,
            links: links(),
            target,
        }
    }

    impl Rig {
        fn live(&self, url: &str, day: u32) -> Option<bool> {
            let now = Timestamp::from(i64::from(day) * DAY_MS + DAY_MS / 2);
            let resolved = self.links.resolve(&*self.store, token(url), now).unwrap();
            resolved.map(|r| r.live)
        }

        fn urls(&self) -> (String, String, String) {
            let (l, t) = (&self.links, &self.target);
            let out = l.decorate("<a href=\"https://x.example/\">x</a>", t, "-");
            let path = |marker: &str| {
                let rest = out.split(marker).nth(1).unwrap();
                format!("https://m/{}", rest.split('"').next().unwrap())
            };
            (l.unsubscribe_url(t), path("/t/o/"), path("/t/c/"))
        }
    }

    #[test]
    fn after_a_rotation_clicks_and_opens_stop_and_unsubscribes_last_their_days() {
        let day = 20_000;
        let r = rig(day);
        let (unsubscribe, open, click) = r.urls();
        for url in [&unsubscribe, &open, &click] {
            assert_eq!(r.live(url, day), Some(true), "{url}");
        }
        r.projects
            .rotate_keys(
                r.target.project,
                Timestamp::from(i64::from(day + 1) * DAY_MS),
            )
            .unwrap();
        assert_eq!(r.live(&open, day + 1), Some(false));
        assert_eq!(r.live(&click, day + 1), Some(false));
        assert_eq!(r.live(&unsubscribe, day + VALID_DAYS), Some(true));
        assert_eq!(r.live(&unsubscribe, day + VALID_DAYS + 1), Some(false));
        // Links made after the rotation work, and do not expire.
        let now = Timestamp::from(i64::from(day + 2) * DAY_MS);
        let fresh = Rig {
            target: LinkTarget {
                issue: Links::issue(&*r.store, r.target.project, now).unwrap(),
                ..r.target
            },
            ..r
        };
        let (unsubscribe, open, click) = fresh.urls();
        assert_eq!(fresh.live(&open, day + 2), Some(true));
        assert_eq!(fresh.live(&click, day + 2), Some(true));
        assert_eq!(fresh.live(&unsubscribe, day + 10 * VALID_DAYS), Some(true));
    }

    #[test]
    fn a_disabled_projects_clicks_and_opens_do_nothing_but_its_unsubscribes_work() {
        let r = rig(20_000);
        let (unsubscribe, open, click) = r.urls();
        r.projects.set_disabled(r.target.project, true).unwrap();
        assert_eq!(r.live(&open, 20_000), Some(false));
        assert_eq!(r.live(&click, 20_000), Some(false));
        assert_eq!(r.live(&unsubscribe, 20_000 + 5 * VALID_DAYS), Some(true));
        r.projects.set_disabled(r.target.project, false).unwrap();
        assert_eq!(r.live(&click, 20_000), Some(true));
    }

    #[test]
    fn old_format_unsubscribe_links_still_work_and_old_format_clicks_stop_at_a_rotation() {
        let r = rig(20_000);
        let t = &r.target;
        let sealer = Sealer::new([9; 32]);
        let mut payload = vec![b'u'];
        payload.extend_from_slice(t.project.as_bytes());
        payload.extend_from_slice(t.contact.as_bytes());
        payload.extend_from_slice(&[0; 16]);
        let unsubscribe = format!("https://m/unsubscribe/{}", sealer.legacy(&payload));
        let mut payload = vec![b'c'];
        payload.extend_from_slice(t.project.as_bytes());
        payload.extend_from_slice(t.email.as_bytes());
        payload.extend_from_slice(b"https://x.example/");
        let click = format!("https://m/t/c/{}", sealer.legacy(&payload));
        assert_eq!(
            link(&r.links, token(&unsubscribe)),
            Some(Link::Unsubscribe {
                project: t.project,
                contact: t.contact,
                campaign: None
            })
        );
        assert_eq!(r.live(&unsubscribe, 20_000), Some(true));
        assert_eq!(r.live(&click, 20_000), Some(true));
        r.projects
            .rotate_keys(t.project, Timestamp::from(20_100 * DAY_MS))
            .unwrap();
        assert_eq!(r.live(&click, 20_100), Some(false));
        assert_eq!(r.live(&unsubscribe, 20_100 + VALID_DAYS), Some(true));
        assert_eq!(r.live(&unsubscribe, 20_100 + VALID_DAYS + 1), Some(false));
    }
}
