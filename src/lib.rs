//! Mailroom: a self-hosted email delivery and audience platform. This crate is the
//! HTTP edge, the CLI and the configuration; the engine lives in `mailroom-actors`.

pub mod api;
pub mod app;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod contacts_csv;
pub mod control;
pub mod dashboard;
pub mod export;
pub mod failure;
pub mod http;
pub mod listen;
pub mod logging;
pub mod startup;
pub mod state;
pub mod transfer;
