//! Where the dispatcher's signing keys come from: the sender's verified domain (the
//! domain feature's `verified_sender`), read at each delivery.

use std::sync::Arc;

use super::{DkimLookup, DkimParams, NoKey};
use crate::domain::verified_sender;
use crate::store::Store;

/// A sender's key is its verified domain's, read from the store at each delivery, so a
/// domain that stops being verified stops its mail.
pub fn lookup(store: Arc<dyn Store>) -> DkimLookup {
    Arc::new(move |project, from| {
        let sender = verified_sender(&*store, project, from)
            .map_err(|source| NoKey::Store {
                domain: from.domain().to_owned(),
                source,
            })?
            .ok_or_else(|| NoKey::Unverified(from.domain().to_owned()))?;
        Ok(DkimParams {
            domain: sender.domain,
            selector: sender.selector,
            private_key_pem: sender.private_key_pem,
            aligned_return_path: sender.return_path_for,
        })
    })
}
