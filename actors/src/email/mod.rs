//! Transactional and marketing email as records: a send request rendered and queued
//! (`send`), the email records, their outbox keys and delivery outcomes (`sending`),
//! and their opens and clicks (`engagement`).
//! The mailer delivers what is queued here.

pub mod actions;
pub mod engagement;
pub(crate) mod erasure;
pub mod handlers;
pub(crate) mod retention;
pub mod sending;
