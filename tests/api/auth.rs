//! Keys and projects: 401, 403, disabled projects, rotation and the rate limit.

use serde_json::json;

use crate::support::app::{TestApp, ADMIN_TOKEN};

#[test]
fn a_request_without_a_key_gets_401_missing_auth() {
    let app = TestApp::spawn();
    let r = app.request("GET", "/contacts", None, None);
    assert_eq!((r.status, r.code().as_str()), (401, "MISSING_AUTH"));
    let r = app.request("GET", "/contacts", Some(""), None);
    assert_eq!(r.status, 401);
}

#[test]
fn an_unknown_key_gets_401_invalid_api_key() {
    let app = TestApp::spawn();
    for key in ["sk_doesnotexistdoesnotexistdoesnotexist00", "garbage"] {
        let r = app.get("/contacts", key);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "INVALID_API_KEY"),
            "{key}"
        );
    }
}

#[test]
fn a_public_key_on_a_secret_endpoint_gets_403_forbidden() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.get("/contacts", &p.public);
    assert_eq!((r.status, r.code().as_str()), (403, "FORBIDDEN"));
    let r = app.post("/contacts", &p.public, json!({"email": "a@example.com"}));
    assert_eq!(r.status, 403);
    assert_eq!(
        app.get("/contacts", &p.secret).json()["total"],
        0,
        "nothing was written"
    );
}

#[test]
fn a_disabled_project_gets_403_until_it_is_enabled_again() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        &format!("/admin/projects/{}/disable", p.id),
        ADMIN_TOKEN,
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["disabled"], true);
    let r = app.get("/contacts", &p.secret);
    assert_eq!((r.status, r.code().as_str()), (403, "PROJECT_DISABLED"));
    app.post(
        &format!("/admin/projects/{}/enable", p.id),
        ADMIN_TOKEN,
        json!({}),
    );
    assert_eq!(app.get("/contacts", &p.secret).status, 200);
}

#[test]
fn rotated_keys_work_and_the_old_ones_stop_working() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let r = app.post(
        &format!("/admin/projects/{}/rotate-keys", p.id),
        ADMIN_TOKEN,
        json!({}),
    );
    assert_eq!(r.status, 200);
    let fresh = r.json()["secretKey"].as_str().unwrap().to_owned();
    assert_eq!(app.get("/contacts", &p.secret).code(), "INVALID_API_KEY");
    assert_eq!(app.get("/contacts", &fresh).status, 200);
}

#[test]
fn the_admin_api_needs_the_admin_token() {
    let app = TestApp::spawn();
    let r = app.request("GET", "/admin/projects", None, None);
    assert_eq!(r.status, 401);
    let r = app.get("/admin/projects", "wrong-token");
    assert_eq!(r.status, 401);
    let p = app.create_project("Acme");
    let r = app.get("/admin/projects", &p.secret);
    assert_eq!(r.status, 401, "a project key is not the admin token");
    let list = app.get("/admin/projects", ADMIN_TOKEN).json();
    assert_eq!(list["projects"][0]["name"], "Acme");
    let r = app.post("/admin/projects", ADMIN_TOKEN, json!({"name": ""}));
    assert_eq!(r.status, 422);
}

#[test]
fn the_admin_api_is_absent_without_a_token() {
    let app = TestApp::spawn_with(|s| s.admin.token = "".into());
    let r = app.get("/admin/projects", ADMIN_TOKEN);
    assert_eq!((r.status, r.code().as_str()), (404, "RESOURCE_NOT_FOUND"));
}

#[test]
fn past_the_rate_limit_requests_get_429_with_retry_after_and_ratelimit_headers() {
    let app = TestApp::spawn_with(|s| s.limits.requests_per_minute = 5);
    let p = app.create_project("Acme");
    let other = app.create_project("Other");
    for i in 0..5 {
        let r = app.get("/contacts", &p.secret);
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.header("RateLimit-Limit"), Some("5"));
        assert_eq!(
            r.header("RateLimit-Remaining"),
            Some((4 - i).to_string().as_str())
        );
        assert!(r.header("RateLimit-Reset").is_some());
    }
    let r = app.get("/contacts", &p.secret);
    assert_eq!((r.status, r.code().as_str()), (429, "RATE_LIMIT_EXCEEDED"));
    let retry: u64 = r.header("Retry-After").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    assert_eq!(r.header("RateLimit-Remaining"), Some("0"));
    assert_eq!(
        app.get("/contacts", &other.secret).status,
        200,
        "the budget is per project"
    );
}

#[test]
fn with_the_rate_limit_off_there_are_no_ratelimit_headers() {
    let app = TestApp::spawn_with(|s| s.limits.requests_per_minute = 0);
    let p = app.create_project("Acme");
    for _ in 0..20 {
        let r = app.get("/contacts", &p.secret);
        assert_eq!(r.status, 200);
        assert!(r.header("RateLimit-Limit").is_none());
    }
}

#[test]
fn a_short_admin_token_stops_start_up_with_a_clear_message() {
    let stderr = crate::support::app::refused_start(|s| {
        s.admin.token = "short-token-of-31-characters-xx".into()
    });
    assert!(
        stderr.contains("admin.token") && stderr.contains("at least 32"),
        "{stderr}"
    );
}

#[test]
fn wrong_admin_tokens_are_throttled_and_then_even_the_right_one_waits() {
    let app = TestApp::spawn();
    for i in 0..5 {
        let r = app.get("/admin/projects", &format!("guess-{i}"));
        assert_eq!(r.status, 401, "guess {i}: {}", r.text);
    }
    let r = app.get("/admin/projects", "guess-5");
    assert_eq!(r.status, 429, "{}", r.text);
    assert!(r.header("retry-after").is_some());
    let r = app.get("/admin/projects", ADMIN_TOKEN);
    assert_eq!(
        r.status, 429,
        "a blocked address learns nothing, not even from the right token"
    );
    assert_eq!(
        app.get("/health", ADMIN_TOKEN).status,
        200,
        "only /admin is blocked"
    );
}

#[test]
fn racing_key_rotations_leave_only_the_last_keys_working() {
    let app = TestApp::spawn();
    let p = app.create_project("Acme");
    let rotations: Vec<_> = (0..16)
        .map(|_| {
            let url = format!("{}/admin/projects/{}/rotate-keys", app.base, p.id);
            std::thread::spawn(move || {
                let r = ureq::post(&url)
                    .set("Authorization", &format!("Bearer {ADMIN_TOKEN}"))
                    .send_json(json!({}))
                    .expect("rotated");
                let v: serde_json::Value = r.into_json().unwrap();
                v["secretKey"].as_str().unwrap().to_owned()
            })
        })
        .collect();
    let keys: Vec<String> = rotations.into_iter().map(|h| h.join().unwrap()).collect();
    let working: Vec<_> = keys
        .iter()
        .filter(|k| app.get("/contacts", k).status == 200)
        .collect();
    assert_eq!(working.len(), 1, "exactly one of the rotated keys works");
    assert_eq!(
        app.get("/contacts", &p.secret).status,
        401,
        "the first key is gone"
    );
}

#[test]
fn the_clock_cannot_be_moved_unless_config_allows_it() {
    let app = TestApp::spawn_with(|s| s.clock.adjustable = false);
    let r = app.post("/admin/clock/advance", ADMIN_TOKEN, json!({"ms": 1000}));
    assert_eq!(r.status, 404, "{}", r.text);
}

#[test]
fn a_client_behind_a_trusted_proxy_is_locked_out_without_locking_out_the_others() {
    let app = TestApp::spawn_with(|s| {
        s.server.trusted_proxies = vec!["127.0.0.0/8".into(), "::1".into()];
    });
    let from = |client: &str, token: &str| {
        app.request_with(
            "GET",
            "/admin/projects",
            Some(token),
            None,
            &[("X-Forwarded-For", client)],
        )
    };
    for i in 0..5 {
        let r = from("203.0.113.5", &format!("guess-{i}"));
        assert_eq!(r.status, 401, "guess {i}: {}", r.text);
    }
    assert_eq!(from("203.0.113.5", "guess-5").status, 429);
    assert_eq!(from("203.0.113.5", ADMIN_TOKEN).status, 429);
    assert_eq!(
        from("198.51.100.1, 203.0.113.5", ADMIN_TOKEN).status,
        429,
        "an address the client put in front of the proxy's is not believed"
    );
    let other = from("203.0.113.6", ADMIN_TOKEN);
    assert_eq!(
        other.status, 200,
        "another client behind the proxy: {}",
        other.text
    );
}

#[test]
fn x_forwarded_for_from_a_client_that_is_not_a_trusted_proxy_changes_nothing() {
    let app = TestApp::spawn();
    for i in 0..5 {
        let r = app.request_with(
            "GET",
            "/admin/projects",
            Some(&format!("guess-{i}")),
            None,
            &[("X-Forwarded-For", &format!("203.0.113.{i}"))],
        );
        assert_eq!(r.status, 401, "guess {i}: {}", r.text);
    }
    let r = app.request_with(
        "GET",
        "/admin/projects",
        Some(ADMIN_TOKEN),
        None,
        &[("X-Forwarded-For", "203.0.113.200")],
    );
    assert_eq!(
        r.status, 200,
        "five guesses are within the budget: {}",
        r.text
    );
    let r = app.request_with(
        "GET",
        "/admin/projects",
        Some("guess-5"),
        None,
        &[("X-Forwarded-For", "203.0.113.201")],
    );
    assert_eq!(
        r.status, 429,
        "counted by the connection's address: {}",
        r.text
    );
}
