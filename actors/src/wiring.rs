//! The one place that names the features to hook them into the core (see
//! `project::hooks`): what `Registry::new` is given in the server and in tests. Only
//! code that builds an engine names this module, so no feature reaches it and the
//! core never names a feature.

use std::sync::Arc;

use crate::campaign::outcomes::CampaignEmails;
use crate::project::hooks::Hooks;
use crate::segment::membership::TrackedSegments;

/// Every feature's hooks.
pub fn hooks() -> Hooks {
    Hooks::default()
        .after_events(crate::workflow::triggers::on_events)
        .after_events(crate::webhooks::fanout::on_events)
        .state(|| Box::<TrackedSegments>::default())
        .state(|| Box::<crate::webhooks::endpoints::Endpoints>::default())
        .emails(Arc::new(CampaignEmails))
        .contact_deleted(crate::suppression::on_contact_deleted)
        .contact_deleted(crate::campaign::unsubscribe::on_contact_deleted)
}
