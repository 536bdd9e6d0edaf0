//! Events: /v1/track's write (`track`, which the edge calls through `actions`) and the
//! read queries (`queries`). An event is appended to the log inside the write unit of
//! whatever records it (`project::events`), so every feature's events land in the same
//! batch as its other writes.

pub mod actions;
pub(crate) mod erasure;
pub mod queries;
pub(crate) mod retention;
pub mod track;
