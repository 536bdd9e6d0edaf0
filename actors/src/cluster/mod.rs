//! What makes several nodes one service: the lease table (`leases`), which projects
//! this node owns (`ownership`), and the failed attempts every node counts (`guard`). It names the foundations only (ids, errors), so the
//! store can implement it and the registry hold it without a circle.

pub mod guard;
pub mod leases;
pub mod ownership;
