//! The engine side of a cluster: which projects this node owns (`ownership`).

pub mod ownership;
