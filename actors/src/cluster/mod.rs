//! What makes several nodes one service: the lease table (`leases`) and which projects
//! this node owns (`ownership`). It names the foundations only (ids, errors), so the
//! store can implement it and the registry hold it without a circle.

pub mod leases;
pub mod ownership;
