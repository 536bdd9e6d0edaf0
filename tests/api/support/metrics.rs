//! Reading the server's /metrics.

use super::app::TestApp;

/// The value of one series (`name` or `name{label="value"}`) in /metrics; 0 when absent.
pub fn metric(app: &TestApp, series: &str) -> f64 {
    let text = app.request("GET", "/metrics", None, None).text;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}
