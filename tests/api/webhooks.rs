//! Event webhooks to the caller (API.md 26), against a real HTTP server on loopback
//! (`mailroom_testkit::HookServer`): endpoints and their checks, deliveries signed as
//! Standard Webhooks sign (verified here with an HMAC of the test's own), retries on the
//! schedule under one `webhook-id` (time moved with the injected clock), a 410 that
//! disables the endpoint, and a deleted endpoint that receives nothing more.

use base64::Engine;
use hmac::{Hmac, Mac};
use mailroom_testkit::{Hit, HookServer};
use serde_json::{json, Value};
use sha2::Sha256;
use std::sync::{Arc, Mutex};

use crate::support::app::{Project, TestApp};
use crate::support::campaign::{advance, eventually};

/// A server whose endpoints may be on loopback (the test's receiver is).
fn app() -> (TestApp, Project) {
    let app = TestApp::spawn_with(|s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.retry_seconds = vec![5, 60];
    });
    let p = app.create_project("Acme");
    (app, p)
}

fn data(r: &crate::support::app::Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.text);
    let v = r.json();
    assert_eq!(v["success"], true, "{}", r.text);
    v["data"].clone()
}

fn endpoint(app: &TestApp, p: &Project, url: &str, events: Value) -> Value {
    data(
        &app.post(
            "/webhooks",
            &p.secret,
            json!({"url": url, "events": events}),
        ),
        201,
    )
}

fn track(app: &TestApp, p: &Project, email: &str, event: &str) {
    let r = app.post(
        "/v1/track",
        &p.secret,
        json!({"email": email, "event": event}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

/// The hits once there are at least `n` (or after the deadline).
/// An endpoint that takes connections and never answers them: its URL, and the
/// connections it holds.
fn silent() -> (String, Arc<Mutex<Vec<std::net::TcpStream>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let holding = held.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            holding.lock().unwrap().push(s);
        }
    });
    (url, held)
}

fn hits(server: &HookServer, n: usize) -> Vec<Hit> {
    eventually(30, || server.hits(), |h: &Vec<Hit>| h.len() >= n)
}

/// Whether `hit` carries a signature of its id, timestamp and body with `secret`, as a
/// Standard Webhooks library checks it.
fn signed_with(hit: &Hit, secret: &str) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("base64");
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).unwrap();
    let (id, ts) = (
        hit.header("webhook-id").expect("webhook-id"),
        hit.header("webhook-timestamp").expect("webhook-timestamp"),
    );
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&hit.body);
    let want = format!("v1,{}", b64.encode(mac.finalize().into_bytes()));
    hit.header("webhook-signature")
        .expect("webhook-signature")
        .split(' ')
        .any(|s| s == want)
}

#[test]
fn an_endpoint_shows_its_secret_once_and_bad_urls_names_and_counts_are_refused() {
    let app = TestApp::spawn_with(|s| s.limits.max_webhooks = 1);
    let p = app.create_project("Acme");
    let bad = |body: Value| app.post("/webhooks", &p.secret, body);
    for (body, field) in [
        (
            json!({"url": "ftp://example.com/x", "events": ["*"]}),
            "url",
        ),
        (
            json!({"url": "http://127.0.0.1:9/x", "events": ["*"]}),
            "url",
        ),
        (json!({"url": "http://10.1.2.3/x", "events": ["*"]}), "url"),
        (
            json!({"url": "https://example.com/x", "events": []}),
            "events",
        ),
        (
            json!({"url": "https://example.com/x", "events": ["email.sentt"]}),
            "events.0",
        ),
    ] {
        let r = bad(body.clone());
        assert_eq!(r.status, 422, "{body}: {}", r.text);
        assert_eq!(r.field_codes()[0].0, field, "{body}: {}", r.text);
    }
    let r = bad(json!({"url": "https://example.com/x", "events": ["email.sentt"]}));
    assert!(
        r.text.contains("did you mean \\\"email.sent\\\""),
        "{}",
        r.text
    );

    let made = endpoint(
        &app,
        &p,
        "https://example.com/hook",
        json!(["email.sent", "signup"]),
    );
    let secret = made["secret"].as_str().expect("the secret, once");
    assert!(secret.starts_with("whsec_"), "{made}");
    assert_eq!(made["enabled"], true);
    let id = made["id"].as_str().unwrap();
    let read = data(&app.get(&format!("/webhooks/{id}"), &p.secret), 200);
    assert!(read.get("secret").is_none(), "not shown again: {read}");
    let listed = data(&app.get("/webhooks", &p.secret), 200);
    assert_eq!(listed["webhooks"][0]["id"], id, "{listed}");

    let over = bad(json!({"url": "https://example.com/2", "events": ["*"]}));
    assert_eq!(over.status, 409, "limits.max_webhooks: {}", over.text);

    let patched = data(
        &app.patch(
            &format!("/webhooks/{id}"),
            &p.secret,
            json!({"enabled": false, "description": "paused"}),
        ),
        200,
    );
    assert_eq!(
        (
            patched["enabled"].as_bool(),
            patched["description"].as_str()
        ),
        (Some(false), Some("paused"))
    );
    let rotated = data(
        &app.post(
            &format!("/webhooks/{id}/rotate-secret"),
            &p.secret,
            json!({}),
        ),
        200,
    );
    assert_ne!(rotated["secret"], made["secret"]);
    assert_eq!(
        app.delete(&format!("/webhooks/{id}"), &p.secret).status,
        204
    );
    let gone = app.get(&format!("/webhooks/{id}"), &p.secret);
    assert_eq!(
        (gone.status, gone.code().as_str()),
        (404, "WEBHOOK_NOT_FOUND")
    );
}

#[test]
fn deliveries_to_an_endpoint_that_keeps_its_connections_open_share_one() {
    let (app, p) = app();
    let server = HookServer::keeping_alive(200);
    let made = endpoint(&app, &p, &server.url("/hook"), json!(["signup"]));
    let deliveries = format!("/webhooks/{}/deliveries", made["id"].as_str().unwrap());
    // One at a time, each settled before the next is tracked: each goes in a lane of
    // its own, and the connection the first lane opened carries the others. (A hit alone
    // is not enough: the server sees the request before its answer is read.)
    for (n, email) in ["ada@example.com", "bea@example.com", "cy@example.com"]
        .iter()
        .enumerate()
    {
        track(&app, &p, email, "signup");
        let settled = eventually(
            30,
            || data(&app.get(&deliveries, &p.secret), 200)["deliveries"].clone(),
            |d: &Value| {
                let d = d.as_array().map(Vec::as_slice).unwrap_or_default();
                d.len() == n + 1 && d.iter().all(|d| d["status"] == "DELIVERED")
            },
        );
        assert_eq!(settled.as_array().map(Vec::len), Some(n + 1), "{settled}");
        assert!(
            settled
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["status"] == "DELIVERED"),
            "{settled}"
        );
    }
    let got = server.hits();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got.iter().all(|h| h.connection == got[0].connection),
        "one connection: {:?}",
        got.iter().map(|h| h.connection).collect::<Vec<_>>()
    );
}

#[test]
fn an_endpoint_that_answers_an_error_gets_a_fresh_connection_for_the_next_delivery() {
    let (app, p) = app();
    let server = HookServer::keeping_alive(500);
    let made = endpoint(&app, &p, &server.url("/hook"), json!(["signup"]));
    let deliveries = format!("/webhooks/{}/deliveries", made["id"].as_str().unwrap());
    for (n, email) in ["ada@example.com", "bea@example.com"].iter().enumerate() {
        track(&app, &p, email, "signup");
        // Each first attempt recorded (a 500: a retry waits) before the next event.
        let tried = eventually(
            30,
            || data(&app.get(&deliveries, &p.secret), 200)["deliveries"].clone(),
            |d: &Value| {
                let d = d.as_array().map(Vec::as_slice).unwrap_or_default();
                d.len() == n + 1 && d.iter().all(|d| d["statusCode"] == 500)
            },
        );
        assert_eq!(tried.as_array().map(Vec::len), Some(n + 1), "{tried}");
    }
    let got = hits(&server, 2);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_ne!(
        got[0].connection, got[1].connection,
        "the connection that carried a failed delivery is not kept"
    );
}

#[test]
fn deliveries_to_an_endpoint_that_closes_its_connections_each_open_another() {
    let (app, p) = app();
    let server = HookServer::start(200);
    endpoint(&app, &p, &server.url("/hook"), json!(["signup"]));
    for (n, email) in ["ada@example.com", "bea@example.com"].iter().enumerate() {
        track(&app, &p, email, "signup");
        hits(&server, n + 1);
    }
    let got = server.hits();
    assert_ne!(got[0].connection, got[1].connection, "{got:?}");
}

#[test]
fn a_tracked_event_arrives_signed_with_the_event_and_its_contact() {
    let (app, p) = app();
    let server = HookServer::start(200);
    let made = endpoint(&app, &p, &server.url("/hook"), json!(["*"]));
    let secret = made["secret"].as_str().unwrap().to_owned();
    track(&app, &p, "ada@example.com", "signup");
    let got = eventually(
        30,
        || server.hits(),
        |h: &Vec<Hit>| h.iter().any(|h| h.json()["type"] == "signup"),
    );
    let hit = got
        .iter()
        .find(|h| h.json()["type"] == "signup")
        .expect("the signup event");
    assert!(signed_with(hit, &secret), "the signature verifies: {hit:?}");
    assert!(!signed_with(hit, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    let body = hit.json();
    assert_eq!(body["data"]["email"], "ada@example.com", "{body}");
    let events = app.get("/events?name=signup", &p.secret).json();
    let event = &events["events"][0];
    assert_eq!(
        body["id"], event["id"],
        "the payload's id is the event's: {body}"
    );
    assert_eq!(hit.header("webhook-id"), event["id"].as_str());
    assert_eq!(
        body["data"]["contactId"], event["contactId"],
        "{body} {event}"
    );
    assert_eq!(hit.header("content-type"), Some("application/json"));

    let test = data(
        &app.post(
            &format!("/webhooks/{}/test", made["id"].as_str().unwrap()),
            &p.secret,
            json!({}),
        ),
        200,
    );
    assert_eq!(
        (test["delivered"].as_bool(), test["statusCode"].as_u64()),
        (Some(true), Some(200))
    );
    let last = hits(&server, got.len() + 1);
    assert!(
        last.iter().any(|h| h.json()["type"] == "webhook.test"),
        "{last:?}"
    );
}

#[test]
fn a_500_then_a_503_then_a_200_are_one_delivery_retried_under_one_webhook_id() {
    let (app, p) = app();
    let server = HookServer::answering(vec![500, 503, 200]);
    let made = endpoint(&app, &p, &server.url("/hook"), json!(["signup"]));
    let id = made["id"].as_str().unwrap();
    track(&app, &p, "ada@example.com", "signup");
    assert_eq!(hits(&server, 1).len(), 1, "the first attempt");
    let deliveries = |app: &TestApp| {
        data(
            &app.get(&format!("/webhooks/{id}/deliveries"), &p.secret),
            200,
        )["deliveries"]
            .clone()
    };
    let first = eventually(30, || deliveries(&app), |d| d[0]["attempt"] == 1);
    assert_eq!(
        (first[0]["status"].as_str(), first[0]["statusCode"].as_u64()),
        (Some("PENDING"), Some(500)),
        "{first}"
    );
    assert!(first[0]["nextAttemptAt"].is_string(), "{first}");
    // retry_seconds = [5, 60]: the clock moves, no test sleeps through it.
    advance(&app, 5_000);
    assert_eq!(hits(&server, 2).len(), 2, "the second attempt, 5 s later");
    eventually(30, || deliveries(&app), |d| d[0]["attempt"] == 2);
    advance(&app, 60_000);
    let all = hits(&server, 3);
    assert_eq!(all.len(), 3, "the third attempt, 60 s later");
    let ids: Vec<_> = all.iter().map(|h| h.header("webhook-id")).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "one webhook-id: {ids:?}");
    let done = eventually(30, || deliveries(&app), |d| d[0]["status"] == "DELIVERED");
    assert_eq!(
        (done[0]["attempt"].as_u64(), done[0]["statusCode"].as_u64()),
        (Some(3), Some(200)),
        "{done}"
    );
    assert_eq!(done.as_array().unwrap().len(), 1, "one delivery: {done}");
    use crate::support::metrics::metric;
    let series = |o: &str| format!("mailroom_webhook_deliveries_total{{outcome=\"{o}\"}}");
    assert_eq!(metric(&app, &series("retried")), 2.0);
    assert_eq!(metric(&app, &series("delivered")), 1.0);
    assert_eq!(metric(&app, "mailroom_webhook_backlog"), 0.0);
}

#[test]
fn a_410_disables_the_endpoint_and_it_gets_no_more_deliveries() {
    let (app, p) = app();
    let server = HookServer::start(410);
    let made = endpoint(&app, &p, &server.url("/hook"), json!(["signup"]));
    let id = made["id"].as_str().unwrap();
    track(&app, &p, "ada@example.com", "signup");
    assert_eq!(hits(&server, 1).len(), 1);
    let hook = eventually(
        30,
        || data(&app.get(&format!("/webhooks/{id}"), &p.secret), 200),
        |h| h["enabled"] == false,
    );
    assert_eq!(hook["enabled"], false, "{hook}");
    assert!(
        hook["disabledReason"]
            .as_str()
            .unwrap_or_default()
            .contains("410"),
        "{hook}"
    );
    track(&app, &p, "bea@example.com", "signup");
    let listed = data(
        &app.get(&format!("/webhooks/{id}/deliveries"), &p.secret),
        200,
    );
    assert_eq!(
        listed["deliveries"].as_array().unwrap().len(),
        1,
        "a disabled endpoint gets no delivery: {listed}"
    );
    assert_eq!(listed["deliveries"][0]["status"], "FAILED", "{listed}");
}

#[test]
fn a_deleted_endpoint_receives_nothing_more_while_a_live_one_does() {
    let (app, p) = app();
    let (dead, live) = (HookServer::start(500), HookServer::start(200));
    let doomed = endpoint(&app, &p, &dead.url("/hook"), json!(["signup"]));
    track(&app, &p, "ada@example.com", "signup");
    assert_eq!(hits(&dead, 1).len(), 1, "the first attempt failed");
    let id = doomed["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/webhooks/{id}"), &p.secret).status,
        204
    );
    endpoint(&app, &p, &live.url("/hook"), json!(["signup"]));
    // Past every retry of the deleted endpoint's delivery; then a control event that
    // the live endpoint receives, after the same delivery round.
    advance(&app, 120_000);
    track(&app, &p, "bea@example.com", "signup");
    assert_eq!(hits(&live, 1).len(), 1, "the live endpoint got the control");
    advance(&app, 120_000);
    track(&app, &p, "cy@example.com", "signup");
    assert_eq!(hits(&live, 2).len(), 2);
    assert_eq!(
        dead.hits().len(),
        1,
        "nothing more reached the deleted endpoint"
    );
}

#[test]
fn deleting_a_contact_calls_off_its_waiting_deliveries_and_erases_their_payloads() {
    let (app, p) = app();
    let (dead, live) = (HookServer::start(500), HookServer::start(200));
    let hook = endpoint(&app, &p, &dead.url("/hook"), json!(["signup"]));
    const VICTIM: &str = "zelda.webhook.q7x@example.com";
    track(&app, &p, VICTIM, "signup");
    assert_eq!(
        hits(&dead, 1).len(),
        1,
        "the first attempt failed; a retry waits"
    );
    let contact = app
        .get(&format!("/contacts?search={VICTIM}"), &p.secret)
        .json()["contacts"][0]["id"]
        .as_str()
        .expect("the contact")
        .to_owned();
    let r = app.delete(&format!("/contacts/{contact}"), &p.secret);
    assert!([202, 204].contains(&r.status), "{}", r.text);
    let id = hook["id"].as_str().unwrap();
    let listed = eventually(
        30,
        || {
            data(
                &app.get(&format!("/webhooks/{id}/deliveries"), &p.secret),
                200,
            )
        },
        |l| l["deliveries"][0]["status"] == "CANCELLED",
    );
    assert_eq!(listed["deliveries"][0]["status"], "CANCELLED", "{listed}");
    // Past the retry, and a control event through a live endpoint after it.
    endpoint(&app, &p, &live.url("/hook"), json!(["control"]));
    advance(&app, 120_000);
    track(&app, &p, "control.q7x@example.com", "control");
    assert_eq!(hits(&live, 1).len(), 1);
    assert_eq!(
        dead.hits().len(),
        1,
        "the erased contact's delivery was not retried"
    );
    if !crate::support::postgres::skipped_on_postgres("reads the sled store's files") {
        drop(live);
        let mut app = app;
        app.kill9();
        assert_eq!(
            crate::support::store::store_copies_of(&app.data_dir, VICTIM),
            Vec::<String>::new(),
            "no copy of the address is left in the store"
        );
    }
}

#[test]
fn deliveries_that_are_over_go_after_retention_webhook_deliveries_days() {
    let (app, p) = app();
    let server = HookServer::start(200);
    let made = endpoint(&app, &p, &server.url("/hook"), json!(["signup"]));
    let id = made["id"].as_str().unwrap();
    track(&app, &p, "ada@example.com", "signup");
    assert_eq!(hits(&server, 1).len(), 1);
    let listed = |app: &TestApp| {
        data(
            &app.get(&format!("/webhooks/{id}/deliveries"), &p.secret),
            200,
        )["deliveries"]
            .as_array()
            .map_or(0, Vec::len)
    };
    eventually(
        30,
        || {
            data(
                &app.get(&format!("/webhooks/{id}/deliveries"), &p.secret),
                200,
            )
        },
        |l| l["deliveries"][0]["status"] == "DELIVERED",
    );
    assert_eq!(listed(&app), 1);
    // Moving the clock runs the purge at once; the default keeps them 7 days.
    advance(&app, 6 * 86_400_000);
    track(&app, &p, "bea@example.com", "signup");
    assert_eq!(hits(&server, 2).len(), 2);
    assert_eq!(
        eventually(30, || listed(&app), |n| *n == 2),
        2,
        "a day short of 7: kept"
    );
    advance(&app, 2 * 86_400_000);
    assert_eq!(
        eventually(30, || listed(&app), |n| *n == 1),
        1,
        "the first went after 7 days, the second (6 days younger) stays"
    );
}

#[test]
fn kill_9_in_a_burst_of_5000_events_loses_no_delivery() {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut app = TestApp::spawn_with(|s| {
        s.webhooks.allow_private_addresses = true;
        s.limits.requests_per_minute = 0;
    });
    let p = app.create_project("Acme");
    let server = HookServer::start(200);
    endpoint(&app, &p, &server.url("/hook"), json!(["burst"]));
    // Four writers, each its own contacts; the ids of the events the server
    // acknowledged are kept.
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (base, key) = (app.base.clone(), p.secret.clone());
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new()
                    .timeout(std::time::Duration::from_secs(10))
                    .build();
                for i in 0..1250 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let sent = agent
                        .post(&format!("{base}/v1/track"))
                        .set("Authorization", &format!("Bearer {key}"))
                        .send_json(
                            json!({"email": format!("w{w}-{i}@example.com"), "event": "burst"}),
                        );
                    match sent.ok().and_then(|r| r.into_json::<Value>().ok()) {
                        Some(v) => {
                            let id = v["data"]["event"].as_str().unwrap_or_default().to_owned();
                            acked.lock().unwrap().push(id);
                        }
                        None => return, // the server is gone
                    }
                }
            })
        })
        .collect();
    let half = eventually(120, || acked.lock().unwrap().len(), |n| *n >= 2_500);
    assert!(half >= 2_500, "the burst is under way");
    app.kill9();
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().expect("a writer");
    }
    let order: Vec<String> = acked.lock().unwrap().clone();
    let acked: HashSet<String> = order.iter().cloned().collect();
    app.restart();
    let delivered = || -> HashSet<String> {
        server
            .hits()
            .iter()
            .filter_map(|h| h.header("webhook-id").map(str::to_owned))
            .collect()
    };
    let got = eventually(120, delivered, |got| acked.is_subset(got));
    let missing: Vec<_> = acked.difference(&got).take(5).collect();
    // What became of each missing one: still in the log (GET /events/{id}), and the
    // delivery outcomes the server counted, so that a failure says lost event or lost
    // delivery.
    let fates: Vec<String> = missing
        .iter()
        .map(|id| {
            let at = order.iter().position(|o| o == *id).unwrap_or_default();
            let status = app.get(&format!("/events/{id}"), &p.secret).status;
            format!("{id} (acknowledged {at}th): GET /events/{{id}} {status}")
        })
        .collect();
    let outcomes: Vec<String> = ["delivered", "retried", "failed"]
        .iter()
        .map(|o| {
            let series = format!("mailroom_webhook_deliveries_total{{outcome=\"{o}\"}}");
            format!("{o} {}", crate::support::metrics::metric(&app, &series))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged events never reached the endpoint, e.g. {fates:?}; outcomes since the restart: {outcomes:?}",
        acked.difference(&got).count(),
        acked.len()
    );
}

#[test]
fn a_dead_endpoint_of_one_project_does_not_slow_a_live_one_of_another() {
    let app = TestApp::spawn_with(|s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.timeout_seconds = 20;
        s.limits.requests_per_minute = 0;
    });
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    // A's endpoint takes connections and never answers them.
    let (silent_url, held) = silent();
    let live = HookServer::start(200);
    let dead = endpoint(&app, &a, &silent_url, json!(["*"]));
    endpoint(&app, &b, &live.url("/hook"), json!(["ping"]));
    track(&app, &b, "b1@example.com", "ping");
    assert_eq!(hits(&live, 1).len(), 1);
    for i in 0..50 {
        track(&app, &a, &format!("a{i}@example.com"), "stuck");
    }
    // Each of A's lanes is stuck on its first delivery, the rest of its queue behind it.
    let hanging = eventually(30, || held.lock().unwrap().len(), |n| *n >= 2);
    assert!(hanging >= 2, "A's endpoint holds its connections");
    track(&app, &b, "b2@example.com", "ping");
    assert_eq!(hits(&live, 2).len(), 2, "B's second delivery arrives");
    // No attempt of A's has ended yet (each waits out its 20 s timeout before it is
    // recorded): B's delivery went out beside A's stuck lanes, not after them.
    let recorded = data(
        &app.get(
            &format!("/webhooks/{}/deliveries", dead["id"].as_str().unwrap()),
            &a.secret,
        ),
        200,
    );
    assert_eq!(recorded["deliveries"], json!([]), "{recorded}");
    assert!(
        held.lock().unwrap().len() <= 4,
        "A's endpoint holds at most its 4 slots (webhooks.max_in_flight_per_endpoint)"
    );
}

#[test]
fn a_dead_endpoints_backlog_of_retries_does_not_hold_back_another_projects_retry() {
    let app = TestApp::spawn_with(|s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.retry_seconds = vec![5, 60];
        s.webhooks.timeout_seconds = 5;
        s.limits.requests_per_minute = 0;
    });
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    // A's endpoint first refuses connections, so 600 first attempts fail at once and
    // wait for their retry; then it points at one that takes connections and never
    // answers, so its retries hold their slots and the rest stay due.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", l.local_addr().unwrap())
    };
    let (silent_url, held) = silent();
    let dead = endpoint(&app, &a, &refused, json!(["stuck"]));
    for i in 0..600 {
        track(&app, &a, &format!("a{i}@example.com"), "stuck");
    }
    let retried = "mailroom_webhook_deliveries_total{outcome=\"retried\"}";
    let queued = eventually(
        120,
        || crate::support::metrics::metric(&app, retried),
        |n| *n >= 600.0,
    );
    assert!(queued >= 600.0, "A's 600 first attempts failed: {queued}");
    let patched = app.patch(
        &format!("/webhooks/{}", dead["id"].as_str().unwrap()),
        &a.secret,
        json!({"url": silent_url}),
    );
    assert_eq!(patched.status, 200, "{}", patched.text);
    // B's endpoint fails its first attempt, and its retry is due after A's 600.
    let live = HookServer::answering(vec![500, 200]);
    endpoint(&app, &b, &live.url("/hook"), json!(["ping"]));
    track(&app, &b, "b@example.com", "ping");
    assert_eq!(hits(&live, 1).len(), 1);
    advance(&app, 6_000);
    let hanging = eventually(30, || held.lock().unwrap().len(), |n| *n >= 1);
    assert!(hanging >= 1, "A's retries hang on its endpoint");
    let got = eventually(20, || live.hits().len(), |n| *n >= 2);
    assert_eq!(
        got, 2,
        "B's retry went out while A's backlog of retries waited behind its full slots"
    );
}

#[test]
fn a_dead_endpoint_does_not_hold_back_a_live_one_of_the_same_project_for_the_same_event() {
    let app = TestApp::spawn_with(|s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.timeout_seconds = 20;
    });
    let p = app.create_project("Acme");
    let (silent_url, held) = silent();
    let live = HookServer::start(200);
    endpoint(&app, &p, &silent_url, json!(["signup"]));
    endpoint(&app, &p, &live.url("/hook"), json!(["signup"]));
    for (n, email) in ["ada@example.com", "bea@example.com"].iter().enumerate() {
        track(&app, &p, email, "signup");
        let got = eventually(10, || live.hits().len(), |h| *h > n);
        assert_eq!(got, n + 1, "the live endpoint got the event at once");
    }
    assert!(
        !held.lock().unwrap().is_empty(),
        "the dead one holds its attempt"
    );
}

#[test]
fn a_project_with_several_dead_endpoints_holds_at_most_its_share_of_the_slots() {
    let app = TestApp::spawn_with(|s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.timeout_seconds = 20;
        s.webhooks.max_in_flight = 4;
        s.webhooks.max_in_flight_per_project = 2;
        s.limits.requests_per_minute = 0;
    });
    let (a, b) = (app.create_project("A"), app.create_project("B"));
    let (silent_url, held) = silent();
    for _ in 0..4 {
        endpoint(&app, &a, &silent_url, json!(["*"]));
    }
    for i in 0..10 {
        track(&app, &a, &format!("a{i}@example.com"), "stuck");
    }
    let hanging = eventually(30, || held.lock().unwrap().len(), |n| *n >= 2);
    assert!(hanging >= 2, "A's endpoints hold their connections");
    // A's four endpoints could take all 4 of the node's slots; its share is 2.
    let live = HookServer::start(200);
    endpoint(&app, &b, &live.url("/hook"), json!(["ping"]));
    track(&app, &b, "b@example.com", "ping");
    let got = eventually(10, || live.hits().len(), |n| *n >= 1);
    assert_eq!(got, 1, "B's event went out beside A's dead endpoints");
    assert_eq!(
        held.lock().unwrap().len(),
        2,
        "A holds 2 slots (webhooks.max_in_flight_per_project)"
    );
}

#[test]
fn an_email_event_carries_the_email_its_message_id_and_subject() {
    let (app, p) = app();
    let trust = app.post(
        &format!("/admin/projects/{}/domains/trust", p.id),
        crate::support::app::ADMIN_TOKEN,
        json!({"domain": "acme.test"}),
    );
    assert_eq!(trust.status, 200, "{}", trust.text);
    let server = HookServer::start(200);
    endpoint(&app, &p, &server.url("/hook"), json!(["email.sent"]));
    let sent = app.post(
        "/v1/send",
        &p.secret,
        json!({"to": "ada@example.com", "from": "hi@acme.test", "subject": "Your receipt", "body": "<p>Thanks</p>"}),
    );
    assert_eq!(sent.status, 200, "{}", sent.text);
    let email = sent.json()["data"]["emails"][0]["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let hit = hits(&server, 1).remove(0);
    let body = hit.json();
    assert_eq!(body["type"], "email.sent", "{body}");
    let data = &body["data"];
    assert_eq!(data["emailId"], email.as_str(), "{body}");
    assert_eq!(data["subject"], "Your receipt", "{body}");
    assert_eq!(data["messageId"], format!("<{email}@acme.test>"), "{body}");
    assert_eq!(data["email"], "ada@example.com", "{body}");
}
