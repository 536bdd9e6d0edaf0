//! What comes back after an email left (API.md 27): bounces a relay reports later and
//! complaints, from a provider's HTTP callback (`providers`) or, later, a delivery
//! report mailed to the email's return path. Each becomes a `Report`, and `effects`
//! applies it in the project's actor: the email's status, its campaign's stats, the
//! contact's subscription, the suppression list and an `email.bounce` /
//! `email.complaint` event (which event webhooks push), once per report.

pub mod effects;
pub mod providers;
pub mod receiver;
pub(crate) mod reports;
pub mod ses;
pub mod stats;

pub use effects::Applied;

/// What the operator set (`[feedback]`).
#[derive(Debug, Clone)]
pub struct FeedbackConfig {
    /// Soft bounces of one address within `soft_bounce_days` that suppress it.
    pub soft_bounce_limit: u32,
    pub soft_bounce_days: u32,
    /// How long a soft-bounce suppression lasts.
    pub soft_suppression_days: u32,
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        FeedbackConfig {
            soft_bounce_limit: 3,
            soft_bounce_days: 7,
            soft_suppression_days: 30,
        }
    }
}

/// What a report says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The address does not take mail (a 5.x.x status, a permanent failure).
    Hard,
    /// Not now (a 4.x.x status, a full mailbox, a delay).
    Soft,
    /// The recipient reported the email as spam.
    Complaint,
}

/// One report about one recipient of one email.
#[derive(Debug, Clone)]
pub struct Report {
    pub kind: Kind,
    /// Where the report came from: `ses`, `postmark`, `sendgrid`, `mailgun`, `smtp`.
    pub source: &'static str,
    /// The report's own id (the provider's event id, or a digest of the report), so the
    /// same report twice changes nothing more.
    pub id: String,
    /// The email's `Message-ID` as the provider saw it, if it gave one.
    pub message_id: Option<String>,
    /// The address that bounced or complained.
    pub recipient: Option<String>,
    /// The enhanced status code (`5.1.1`).
    pub status: Option<String>,
    /// The remote server's words.
    pub diagnostic: Option<String>,
    /// A complaint's feedback type (`abuse`).
    pub feedback_type: Option<String>,
}

/// Classifies a bounce by its enhanced status code (RFC 3463): `5.x.x` hard, `4.x.x`
/// soft; without one, by the SMTP reply code; otherwise `fallback`.
pub(crate) fn kind_of_status(status: Option<&str>, smtp_code: Option<u16>, fallback: Kind) -> Kind {
    match status.map(str::trim).and_then(|s| s.chars().next()) {
        Some('5') => Kind::Hard,
        Some('4') => Kind::Soft,
        _ => match smtp_code {
            Some(500..=599) => Kind::Hard,
            Some(400..=499) => Kind::Soft,
            _ => fallback,
        },
    }
}

/// The email id of one of our `Message-ID`s (`<email id@domain>`), however the
/// provider wrote it (with or without the angle brackets).
pub(crate) fn email_id_of(message_id: &str) -> Option<crate::model::EmailId> {
    let inner = message_id
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>');
    inner.split('@').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_of_five_is_hard_four_soft_and_none_falls_back_to_the_reply_code() {
        assert_eq!(kind_of_status(Some("5.1.1"), None, Kind::Soft), Kind::Hard);
        assert_eq!(
            kind_of_status(Some("4.2.2"), Some(550), Kind::Hard),
            Kind::Soft
        );
        assert_eq!(kind_of_status(None, Some(550), Kind::Soft), Kind::Hard);
        assert_eq!(kind_of_status(Some(""), Some(421), Kind::Hard), Kind::Soft);
        assert_eq!(kind_of_status(None, None, Kind::Soft), Kind::Soft);
    }

    #[test]
    fn our_message_id_gives_back_the_email_id_with_or_without_brackets() {
        let id = crate::model::EmailId::new();
        assert_eq!(email_id_of(&format!("<{id}@acme.test>")), Some(id));
        assert_eq!(email_id_of(&format!("{id}@acme.test")), Some(id));
        assert_eq!(email_id_of("<0100018c-abc@email.amazonses.com>"), None);
    }
}
