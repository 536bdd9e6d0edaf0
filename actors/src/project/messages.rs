//! The messages of the actor itself; each feature owns its own messages (and their
//! handlers), in its folder.

use actix::Message;

/// Stops the actor so that its supervisor restarts it (and it reloads from the store).
/// Used by operators' tooling and by the supervision tests.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Restart;

/// How many times this actor has been (re)started; for supervision tests and metrics.
#[derive(Debug, Message)]
#[rtype(result = "u64")]
pub struct Generation;
