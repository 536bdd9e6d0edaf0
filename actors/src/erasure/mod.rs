//! A contact's erasure, which reaches into every feature that holds the contact's data
//! (events, emails and their engagement, workflow executions): the durable record is
//! the contact feature's (`contact::erasure_record`), each phase is its feature's own
//! (`<feature>::erasure`; an email cancelled by it is counted in its campaign through
//! the core's hooks, so the emails phase names no campaign), and the order of the
//! phases (`erase`) and the runner that drives them and resumes them at start-up
//! (`runner`) sit here, above the features, like retention.

pub mod erase;
pub mod runner;
