//! What makes several nodes one service: the lease table (`leases`). It names the
//! foundations only (ids, errors), so the store can implement it without a circle.

pub mod leases;
