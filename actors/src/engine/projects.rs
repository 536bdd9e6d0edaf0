//! Projects and their keys (the admin API, the CLI and routing read them), and the
//! dashboard's sign-in sessions.

pub use crate::projects::{IssuedKeys, Missing, Projects, MAX_NAME_LEN};
pub use crate::sessions::{Principal, Session, SessionRecords, MAX_PER_PRINCIPAL};
