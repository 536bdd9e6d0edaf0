//! What the API's handlers (`http/`), the dashboard's pages (`dashboard/`), the export
//! and the control socket share: the typed requests and views (which are also the
//! OpenAPI schema), the wire types and checks they are built from, the body parser,
//! the one error table, the guard on wrong secrets, and the client's address.
//! Nothing here handles a route: that is `http/`'s alone.

pub mod admin;
pub mod body;
pub mod campaigns;
pub mod client_addr;
pub mod contacts;
pub mod contacts_bulk;
pub mod domains;
pub mod envelope;
pub mod error;
pub mod events;
pub mod feedback;
pub mod guard;
pub mod listing;
pub mod ops;
pub mod request_id;
pub mod segments;
pub mod send;
pub mod stats;
pub mod suppressions;
pub mod templates;
pub mod track;
pub mod validate;
mod value_de;
pub mod verify;
pub mod webhooks;
pub mod wire;
pub mod workflows;
