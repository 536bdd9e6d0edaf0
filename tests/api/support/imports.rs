//! Contact imports through the API: start one, read its status, wait for its end.

use std::time::Duration;

use serde_json::Value;

use super::app::{Resp, TestApp};
use super::campaign::eventually;

/// POSTs `body` to /contacts/import as `content_type`.
pub fn send_csv(app: &TestApp, key: &str, content_type: &str, body: &str) -> Resp {
    let path = "/contacts/import";
    let result = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
        .post(&format!("{}{path}", app.base))
        .set("Authorization", &format!("Bearer {key}"))
        .set("Content-Type", content_type)
        .send_string(body);
    Resp::of("POST", path, result)
}

/// Starts an import and answers its id.
pub fn import(app: &TestApp, key: &str, csv: &str) -> String {
    let r = send_csv(app, key, "text/csv", csv);
    assert_eq!(r.status, 202, "{}", r.text);
    let v = r.json();
    assert!(
        ["QUEUED", "RUNNING", "COMPLETED"].contains(&v["status"].as_str().unwrap()),
        "{v}"
    );
    v["id"].as_str().unwrap().to_owned()
}

pub fn status(app: &TestApp, key: &str, id: &str) -> Value {
    let r = app.get(&format!("/contacts/imports/{id}"), key);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// Waits (with a deadline) for the import to end, and answers its last status.
pub fn finished(app: &TestApp, key: &str, id: &str) -> Value {
    let v = eventually(
        120,
        || status(app, key, id),
        |v| ["COMPLETED", "FAILED"].contains(&v["status"].as_str().unwrap_or_default()),
    );
    assert_eq!(v["status"], "COMPLETED", "{v}");
    v
}
