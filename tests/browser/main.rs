//! Browser tests: real Chromium, driven over WebDriver (chromedriver), against the real
//! binary started by the API tests' harness. Without Chromium they skip with a message,
//! unless `CI` is set (then they fail: `.ci/run` installs it).

#[allow(dead_code)]
#[path = "../api/helpers.rs"]
mod helpers;

mod browser;
mod campaign;
mod dashboard;
mod pages;
