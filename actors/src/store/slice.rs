//! One slice of a retention walk over a feature's keys (each feature's `retention.rs`):
//! what it removed, and where the walk goes on.

/// What one slice did, and where the next one goes on (None: the walk is done).
#[derive(Debug, Default)]
pub struct Slice {
    pub removed: usize,
    pub next: Option<Vec<u8>>,
    /// The last record the walk got past (a later walk may start after it).
    pub last: Option<Vec<u8>>,
}
