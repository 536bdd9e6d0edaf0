//! Rules the edge applies while it reads a request, shared with the engine so both
//! judge alike: near-miss suggestions for unknown names, the headers a caller may not
//! set, Markdown bodies, idempotency keys, a project's request pace, `/v1/verify`'s
//! address check, and instants as filters read them.

pub use crate::idempotency::{Claim, MAX_KEY_LEN};
pub use crate::mailer::mime::is_reserved_header;
pub use crate::near_miss::{errors as near_misses, meant};
pub use crate::pace::{Pace, Verdict};
pub use crate::render::markdown::to_html as markdown_to_html;
pub use crate::segment::filter::parse_instant;
pub use crate::verify::{parse as parse_address, Address, EmailVerifier, Verification};
