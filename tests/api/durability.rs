//! Acknowledged writes survive `kill -9`; SIGTERM shuts down cleanly.

use serde_json::json;

use crate::helpers::TestApp;

#[test]
fn kill_9_right_after_500_acknowledged_upserts_loses_none_of_them() {
    let mut app = TestApp::spawn_with(&[("MAILROOM__LIMITS__REQUESTS_PER_MINUTE", "0")]);
    let p = app.create_project("Acme");
    std::thread::scope(|s| {
        for t in 0..4 {
            let (app, key) = (&app, &p.secret);
            s.spawn(move || {
                for i in 0..125 {
                    let r = app.post(
                        "/contacts",
                        key,
                        json!({"email": format!("k{t}-{i}@example.com")}),
                    );
                    assert_eq!(r.status, 201);
                }
            });
        }
    });
    app.kill9();
    app.restart();
    let emails = app.all_emails(&p.secret);
    assert_eq!(emails.len(), 500);
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 500);
    let c = app.upsert(&p.secret, json!({"email": "k3-124@example.com"}));
    assert_eq!(c["_meta"]["isNew"], false, "the index survived too");
}

#[test]
fn sigterm_finishes_and_exits_zero_and_the_data_is_there_after_a_restart() {
    let mut app = TestApp::spawn();
    let p = app.create_project("Acme");
    app.upsert(&p.secret, json!({"email": "a@example.com"}));
    let pid = app.child_pid();
    let mut child = app.take_child();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "graceful shutdown exits 0");
    app.restart();
    assert_eq!(app.get("/contacts", &p.secret).json()["total"], 1);
}
