//! What the unsubscribe page shows a recipient: who sends the mail, and which address
//! it goes to, partly masked (whoever holds a forwarded email sees the page too).

use crate::campaign::records as campaigns;
use crate::error::Result;
use crate::model::{CampaignId, ContactId, EmailAddress, ProjectId};
use crate::project::table::ContactTable;
use crate::store::{codec, keys, Store};

/// The sender as the email named it: a campaign's `fromName` and `from`; mail outside a
/// campaign (or of a deleted one) names the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub name: Option<String>,
    pub address: Option<EmailAddress>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    pub sender: Sender,
    /// None once the contact is gone (erased or deleted).
    pub masked: Option<String>,
    pub subscribed: bool,
}

/// `a***@example.com`: the first character of the local part, then `***`.
pub fn mask(email: &EmailAddress) -> String {
    let first: String = email.local_part().chars().take(1).collect();
    format!("{first}***@{}", email.domain())
}

pub fn recipient(
    store: &dyn Store,
    table: &ContactTable,
    project: ProjectId,
    contact: ContactId,
    campaign: Option<CampaignId>,
) -> Result<Recipient> {
    let from_campaign = match campaign {
        Some(id) => campaigns::load(store, project, id)?,
        None => None,
    };
    let sender = match from_campaign {
        Some(c) => Sender {
            name: c.from_name.filter(|n| !n.trim().is_empty()),
            address: Some(c.from),
        },
        None => Sender {
            name: project_name(store, project)?,
            address: None,
        },
    };
    let contact = table.get(contact)?;
    Ok(Recipient {
        sender,
        masked: contact.as_ref().map(|c| mask(&c.email)),
        subscribed: contact.is_some_and(|c| c.subscribed),
    })
}

fn project_name(store: &dyn Store, project: ProjectId) -> Result<Option<String>> {
    Ok(match store.get(&keys::project(project))? {
        Some(b) => Some(codec::decode::<crate::model::Project>(&b)?.name),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_address_keeps_the_first_character_and_the_domain() {
        let m = |s: &str| mask(&EmailAddress::parse(s).unwrap());
        assert_eq!(m("alice@example.com"), "a***@example.com");
        assert_eq!(m("b@example.org"), "b***@example.org");
        assert_eq!(m("émile@exemple.fr"), "é***@exemple.fr");
    }
}
