//! Work over `len` items cut into parts, each part on a scoped thread of its own: what
//! a segment count does over the contact table's rows or its columns, and the columns'
//! build.

use std::ops::Range;

use crate::error::{Error, Result};

/// `f` over `0..len` cut into up to `threads` ranges of about equal size, each on a
/// thread of its own, the results in order; one range on the calling thread below
/// `from` items or with fewer than two threads. A part's thread that panics is an
/// internal error saying `what` panicked.
pub fn in_parts<T: Send>(
    len: usize,
    threads: usize,
    from: usize,
    what: &str,
    f: impl Fn(Range<usize>) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    if len < from || threads < 2 {
        return Ok(vec![f(0..len)?]);
    }
    let size = len.div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..len)
            .step_by(size)
            .map(|start| s.spawn(move || f(start..(start + size).min(len))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal(format!("{what} panicked"))))
            })
            .collect()
    })
}

/// The machine's cores (1 when it cannot tell).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
