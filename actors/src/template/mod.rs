//! Templates: their records, written in the project's actor and read by id or as a
//! whole list (`records`). The type itself is `model::Template`; rendering is `render`.

pub mod handlers;
pub mod records;
