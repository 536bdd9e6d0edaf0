//! Templates: their records, written in the project's actor and read by id or as a
//! whole list (`records`), and the use cases the edge calls (`actions`). The type
//! itself is `model::Template`; rendering is `render`.

pub mod actions;
pub mod records;
