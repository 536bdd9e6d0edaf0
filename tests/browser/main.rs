//! Browser tests: real Chromium, driven over WebDriver (chromedriver), against the real
//! binary started by the API tests' harness. Without Chromium they skip with a message,
//! unless `CI` is set (then they fail: `.ci/run` installs it).

// The API tests' support: this crate uses part of it.
#[allow(dead_code, unused_imports)]
#[path = "../api/support/mod.rs"]
mod support;

mod browser;
mod campaign;
mod dashboard;
mod pages;
