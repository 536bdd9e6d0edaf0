//! The signed links of marketing mail (unsubscribe, open pixel, click): issued when an
//! email is queued, resolved when a recipient follows one. Below the features: the
//! registry owns the signer, and the email and campaign features both use it.

pub mod signed;
pub mod token;

pub use signed::{Link, LinkTarget, Links, Resolved};
