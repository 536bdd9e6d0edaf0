//! The log, on stderr: text for people, coloured only when stderr is a terminal (a file
//! or a pipe gets no escape codes), or one JSON object a line for log shippers.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{Log, LogFormat};

pub fn init(log: &Log) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match log.format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}
