//! Segments and the one filter engine. `filter` parses the filter language of
//! API.md section 8 into a typed tree, `eval` compiles it into an evaluator (segments,
//! campaign audience filters and workflow CONDITION steps all use these two), `scan`
//! runs an evaluator over a project's stored contacts, `model` is the segment
//! record, and `membership` keeps the project actor's segments and judges each contact
//! write by them (entries and exits, STATIC members of a deleted contact).

pub mod actions;
pub mod budget;
pub mod eval;
pub mod filter;
pub mod handlers;
pub mod membership;
pub mod model;
pub mod queries;
pub mod records;
pub mod scan;
pub mod schema;

#[cfg(test)]
mod proptests;

pub use eval::{Compiled, ContactSubject};
pub use filter::{Condition, Group};
pub use model::{slug, Segment, SegmentKind};
pub use schema::FilterDocument;
