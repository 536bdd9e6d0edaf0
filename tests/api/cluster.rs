//! Several nodes on one PostgreSQL schema (docs/cluster.md): any node answers any
//! request, the owner of a project marks its answers with `X-Mailroom-Node`, sends and
//! campaigns through a node that does not own the project arrive once each, and a dead or
//! paused owner's projects move to another node without losing an acknowledged write or
//! sending an email twice (but for those in flight at the kill). Each test runs only on
//! the PostgreSQL pass and says it is skipped otherwise.

use std::collections::BTreeMap;

use mailroom_testkit::{SmtpServer, TestDns};
use serde_json::{json, Value};

use crate::support::app::{Project, ADMIN_TOKEN};
use crate::support::campaign::{self, data, eventually, id, tally};
use crate::support::cluster::TestCluster;
use crate::support::imports;
use crate::support::relay::{verify_domain, DOMAIN};
use crate::support::settings::{self, Setup};

/// How many emails may be with the relay at once (`sending.max_in_flight`): the most a
/// kill can cause to go twice.
const IN_FLIGHT: usize = 8;

/// Nodes that send through `smtp` and ask `dns`.
fn relayed(dns: &TestDns, smtp: &SmtpServer) -> impl Fn(&mut Setup) + 'static {
    let (ns, port) = (dns.addr(), smtp.port());
    move |s: &mut Setup| {
        s.dns.nameservers = vec![ns.clone()];
        settings::smtp_relay(s, port);
        s.sending.max_in_flight = IN_FLIGHT;
    }
}

/// A project made through node 0, its domain verified, and the node that owns it.
fn project(c: &TestCluster, dns: &TestDns) -> (Project, usize) {
    let p = c.node(0).create_project("Acme");
    let owner = c.owner_of(0, &p.secret);
    verify_domain(c.node(c.other_than(owner)), dns, &p, DOMAIN);
    (p, owner)
}

/// Imports `emails` as subscribed contacts through node `via`.
fn import(c: &TestCluster, via: usize, p: &Project, emails: &[String]) {
    let csv = format!("email\n{}\n", emails.join("\n"));
    let job = imports::import(c.node(via), &p.secret, &csv);
    imports::finished(c.node(via), &p.secret, &job);
}

/// Copies of each address among the relay's messages, and the addresses that got more
/// than one.
fn twice(got: &BTreeMap<String, usize>) -> Vec<(&String, &usize)> {
    got.iter().filter(|(_, n)| **n > 1).collect()
}

#[test]
fn a_project_made_through_one_node_is_written_through_a_second_and_read_through_a_third() {
    let Some(c) = TestCluster::start(3, |_| {}) else {
        return;
    };
    c.settled(3);
    let p = c.node(0).create_project("Acme");
    let written = c.node(1).post(
        "/contacts",
        &p.secret,
        json!({"email": "ada@example.com", "data": {"plan": "pro"}}),
    );
    assert!([200, 201].contains(&written.status), "{}", written.text);
    let owner = written
        .header("X-Mailroom-Node")
        .expect("the answer names the node that served it")
        .to_owned();
    let read = c.node(2).get("/contacts?search=ada@example.com", &p.secret);
    assert_eq!(read.status, 200, "{}", read.text);
    assert_eq!(
        read.json()["contacts"][0]["data"]["plan"],
        "pro",
        "{}",
        read.text
    );
    assert_eq!(read.header("X-Mailroom-Node"), Some(owner.as_str()));
    for i in 0..3 {
        assert_eq!(
            c.owner_of(i, &p.secret),
            c.index_of(&owner),
            "node-{i} routes to the owner"
        );
        let h = c.health(i);
        assert_eq!(h["backend"], "postgres", "{h}");
        assert_eq!(h["nodeId"], format!("node-{i}"), "{h}");
    }
    let owned: u64 = (0..3)
        .map(|i| c.health(i)["projectsOwned"].as_u64().expect("a count"))
        .sum();
    assert_eq!(owned, 1, "exactly one node owns the project");
}

/// Asks every node with `key` until each gives `status` (or the deadline of a lease and
/// two seconds, plus a second of slack for the test's own requests, passes).
fn every_node_answers(c: &TestCluster, key: &str, status: u16) {
    let deadline = std::time::Instant::now()
        + std::time::Duration::from_secs(crate::support::cluster::LEASE_SECONDS + 3);
    for i in 0..c.nodes.len() {
        let r = eventually(
            crate::support::cluster::LEASE_SECONDS + 3,
            || c.node(i).get("/contacts?limit=1", key),
            |r| r.status == status || std::time::Instant::now() >= deadline,
        );
        assert_eq!(r.status, status, "node-{i}: {}", r.text);
    }
}

#[test]
fn keys_rotated_and_projects_disabled_by_the_cli_are_refused_by_every_node() {
    let Some(c) = TestCluster::start(3, |_| {}) else {
        return;
    };
    c.settled(3);
    let p = c.node(0).create_project("Acme");
    // Every node has used (and so cached) the key.
    for i in 0..3 {
        let r = c.node(i).get("/contacts?limit=1", &p.secret);
        assert_eq!(r.status, 200, "node-{i}: {}", r.text);
    }
    let rotated = c.cli_without_a_node(&["project", "rotate-keys", &p.id]);
    assert!(
        rotated.status.success(),
        "{}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    let keys: Value = serde_json::from_slice(&rotated.stdout).expect("the new keys as JSON");
    let new_secret = keys["secretKey"].as_str().expect("a new secret key");
    every_node_answers(&c, &p.secret, 401);
    every_node_answers(&c, new_secret, 200);

    let disabled = c.cli_without_a_node(&["project", "disable", &p.id]);
    assert!(
        disabled.status.success(),
        "{}",
        String::from_utf8_lossy(&disabled.stderr)
    );
    every_node_answers(&c, new_secret, 403);
    let write = c
        .node(1)
        .post("/contacts", new_secret, json!({"email": "ada@example.com"}));
    assert_eq!(
        write.status, 403,
        "a disabled project takes no write: {}",
        write.text
    );
}

#[test]
fn a_blocked_address_gets_the_same_answer_for_the_right_admin_token_as_for_a_wrong_one() {
    let Some(c) = TestCluster::start(2, |_| {}) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Acme");
    let owner = c.owner_of(0, &p.secret);
    let via = c.other_than(owner);
    let path = format!("/admin/projects/{}/enable", p.id);
    let ask = |token: &str| c.node(via).request("POST", &path, Some(token), Some("{}"));
    let routed = ask(ADMIN_TOKEN);
    assert_eq!(routed.status, 200, "{}", routed.text);
    assert_eq!(
        routed.header("X-Mailroom-Node"),
        Some(format!("node-{owner}").as_str()),
        "the right token is routed to the owner"
    );
    for i in 0..5 {
        let r = ask(&format!("guess-{i}"));
        assert_eq!(r.status, 401, "guess {i}: {}", r.text);
    }
    assert_eq!(ask("guess-5").status, 429);
    let (right, wrong) = (ask(ADMIN_TOKEN), ask("guess-6"));
    assert_eq!(right.status, 429, "{}", right.text);
    assert_eq!(
        (right.status, right.header("X-Mailroom-Node")),
        (wrong.status, wrong.header("X-Mailroom-Node")),
        "nothing tells the right token from a wrong one"
    );
}

#[test]
fn a_wrong_admin_token_on_a_path_no_handler_takes_is_counted_all_the_same() {
    let Some(c) = TestCluster::start(1, |_| {}) else {
        return;
    };
    let p = c.node(0).create_project("Acme");
    // Routing compares the token for any path under the project: no such path may
    // compare tokens for free.
    for i in 0..6 {
        let path = format!("/admin/projects/{}/no/such/thing", p.id);
        let r = c.node(0).get(&path, &format!("guess-{i}"));
        assert_eq!(r.status, 404, "guess {i}: {}", r.text);
    }
    let r = c.node(0).get("/admin/projects", ADMIN_TOKEN);
    assert_eq!(r.status, 429, "six wrong guesses were counted: {}", r.text);
}

#[test]
fn two_nodes_count_wrong_admin_tokens_against_one_budget() {
    let Some(c) = TestCluster::start(2, |_| {}) else {
        return;
    };
    for (node, i) in [(0, 0), (1, 1), (0, 2), (1, 3), (0, 4)] {
        let r = c.node(node).get("/admin/projects", &format!("guess-{i}"));
        assert_eq!(r.status, 401, "guess {i} on node-{node}: {}", r.text);
    }
    let sixth = c.node(1).get("/admin/projects", "guess-5");
    assert_eq!(sixth.status, 429, "{}", sixth.text);
    for node in 0..2 {
        let r = c.node(node).get("/admin/projects", ADMIN_TOKEN);
        assert_eq!(
            r.status, 429,
            "node-{node} blocks the address too: {}",
            r.text
        );
    }
}

#[test]
fn a_forwarding_proof_is_good_once_and_only_for_the_body_it_was_made_for() {
    let Some(c) = TestCluster::start(1, |_| {}) else {
        return;
    };
    let p = c.node(0).create_project("Acme");
    let auth = format!("Bearer {}", p.secret);
    let proof = |body: &str| {
        mailroom::http::Forwarded {
            to: "node-0",
            method: "POST",
            target: "/contacts",
            authorization: &auth,
            body: body.as_bytes(),
            node: "node-9",
            client: "192.0.2.7",
        }
        .headers(crate::support::cluster::SECRET)
    };
    let send = |headers: &[(&'static str, String)], body: &str| {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        c.node(0)
            .request_with("POST", "/contacts", Some(&p.secret), Some(body), &headers)
    };
    let ada = r#"{"email":"ada@example.com"}"#;
    let headers = proof(ada);
    let first = send(&headers, ada);
    assert_eq!(first.status, 201, "{}", first.text);
    let replayed = send(&headers, ada);
    assert_eq!(replayed.status, 403, "a replayed proof: {}", replayed.text);
    let swapped = send(&proof(ada), r#"{"email":"eve@example.com"}"#);
    assert_eq!(
        swapped.status, 400,
        "another body under a fresh proof: {}",
        swapped.text
    );
    let eve = c.node(0).get("/contacts?search=eve@example.com", &p.secret);
    assert_eq!(eve.json()["total"], 0, "{}", eve.text);
}

#[test]
fn a_non_owner_refuses_a_public_key_outside_v1_track_before_reading_the_body() {
    use std::io::{Read, Write};
    let Some(c) = TestCluster::start(2, |_| {}) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Acme");
    let via = c.other_than(c.owner_of(0, &p.secret));
    let addr = c.node(via).base.trim_start_matches("http://").to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // Forty megabytes announced, a few bytes sent: a node that waited for the body
    // would not answer within the timeout.
    write!(
        conn,
        "POST /contacts/import HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: text/csv\r\nContent-Length: 40000000\r\n\r\nemail\n",
        p.public
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!("no answer before the body: {other:?} after {head:?}"),
        }
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
}

#[test]
fn a_forwarded_request_without_the_clusters_secret_is_refused() {
    let Some(c) = TestCluster::start(1, |_| {}) else {
        return;
    };
    let p = c.node(0).create_project("Acme");
    let r = c.node(0).request_with(
        "GET",
        "/contacts",
        Some(&p.secret),
        None,
        &[
            ("X-Mailroom-Forwarded-By", "node-9"),
            ("X-Mailroom-Forward-Auth", "guess"),
        ],
    );
    assert_eq!(r.status, 403, "{}", r.text);
}

#[test]
fn made_up_project_ids_on_admin_paths_make_no_node_take_a_lease() {
    let Some(c) = TestCluster::start(1, |_| {}) else {
        return;
    };
    let p = c.node(0).create_project("Acme");
    eventually(30, || c.health(0), |h| h["projectsOwned"] == 1);
    // Four: a fifth failure in a minute would block this address (the admin guard).
    for i in 0..4 {
        let path = format!("/admin/projects/0190a1b2-c3d4-7e5f-8a9b-{i:012}/disable");
        let anonymous = c.node(0).request("POST", &path, None, Some("{}"));
        assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    }
    for i in 0..20 {
        let path = format!("/admin/projects/0190a1b2-c3d4-7e5f-8a9b-{i:012}/disable");
        let admin = c
            .node(0)
            .request("POST", &path, Some(ADMIN_TOKEN), Some("{}"));
        assert_eq!(admin.status, 404, "{}", admin.text);
    }
    let h = c.health(0);
    assert_eq!(h["projectsOwned"], 1, "only the real project is held: {h}");
    let real = format!("/admin/projects/{}/disable", p.id);
    let r = c
        .node(0)
        .request("POST", &real, Some(ADMIN_TOKEN), Some("{}"));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("X-Mailroom-Node"), Some("node-0"));
}

#[test]
fn a_project_export_through_a_node_that_does_not_own_the_project_has_all_its_contacts() {
    let Some(c) = TestCluster::start(2, |_| {}) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Acme");
    for i in 0..3 {
        let r = c.node(0).post(
            "/contacts",
            &p.secret,
            json!({"email": format!("a{i}@acme.test")}),
        );
        assert!([200, 201].contains(&r.status), "{}", r.text);
    }
    let elsewhere = c.other_than(c.owner_of(0, &p.secret));
    let out = c.cli(elsewhere, &["project", "export", &p.id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let contacts = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["kind"] == "contact")
        .count();
    assert_eq!(contacts, 3, "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_body_over_the_limit_is_refused_by_the_node_it_reaches_without_forwarding() {
    let Some(c) = TestCluster::start(2, |s| s.limits.max_body_bytes = 1024) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Acme");
    let via = c.other_than(c.owner_of(0, &p.secret));
    let body = json!({"email": "a@example.com", "data": {"pad": "x".repeat(2000)}}).to_string();
    let r = c
        .node(via)
        .request("POST", "/contacts", Some(&p.secret), Some(&body));
    assert_eq!((r.status, r.code().as_str()), (413, "PAYLOAD_TOO_LARGE"));
    assert_eq!(r.header("X-Mailroom-Node"), None, "nobody served it");
    let ok = json!({"email": "a@example.com"}).to_string();
    let r = c
        .node(via)
        .request("POST", "/contacts", Some(&p.secret), Some(&ok));
    assert!([200, 201].contains(&r.status), "{}", r.text);
}

#[test]
fn sends_and_a_two_thousand_recipient_campaign_through_a_node_that_is_not_the_owner_arrive_once_each(
) {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let Some(c) = TestCluster::start(3, relayed(&dns, &smtp)) else {
        return;
    };
    c.settled(3);
    let (p, owner) = project(&c, &dns);
    let via = c.other_than(owner);
    for i in 0..20 {
        let r = c.node(via).post(
            "/v1/send",
            &p.secret,
            json!({"to": format!("send{i}@example.com"), "from": campaign::FROM,
                   "subject": "Hi", "body": "<p>Hi</p>"}),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(
            r.header("X-Mailroom-Node"),
            Some(format!("node-{owner}").as_str())
        );
    }
    smtp.wait_for(20, campaign::wait());
    let recipients = campaign::emails("reader", 2_000);
    import(&c, via, &p, &recipients);
    let cid = id(&campaign::create(c.node(via), &p, json!({})));
    campaign::send_and_settle(c.node(via), &p, &smtp, &cid, 2_000);
    let got = smtp.wait_for(2_020, campaign::wait());
    let copies = tally(&got);
    assert_eq!(copies.len(), 2_020, "every recipient got mail");
    assert!(
        twice(&copies).is_empty(),
        "none twice: {:?}",
        twice(&copies)
    );
}

#[test]
fn kill_9_of_the_owner_during_a_campaign_moves_it_to_another_node_that_completes_it() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let relay = relayed(&dns, &smtp);
    let Some(mut c) = TestCluster::start(3, move |s| {
        relay(s);
        // Slow enough that the kill lands in the middle.
        s.sending.rate_per_second = 200;
    }) else {
        return;
    };
    c.settled(3);
    let (p, owner) = project(&c, &dns);
    let via = c.other_than(owner);
    let recipients = campaign::emails("reader", 2_000);
    import(&c, via, &p, &recipients);
    let cid = id(&campaign::create(c.node(via), &p, json!({})));
    data(&campaign::send(c.node(via), &p, &cid, json!({})), 200);
    let before = eventually(30, || smtp.count(), |n| *n >= 200);
    assert!(before >= 200, "the campaign is under way");
    c.nodes[owner].kill9();
    let heir = c.served_elsewhere(via, &p.secret, owner);
    assert_ne!(heir, owner);
    let done = campaign::campaign_when(c.node(via), &p, &cid, "SENT");
    assert_eq!(done["status"], "SENT", "{done}");
    let got = eventually(60, || smtp.received(), |got| tally(got).len() >= 2_000);
    let copies = tally(&got);
    assert_eq!(copies.len(), 2_000, "every recipient got the campaign");
    let again = twice(&copies);
    assert!(
        again.len() <= IN_FLIGHT,
        "only the emails in flight at the kill went twice: {again:?}"
    );
}

#[test]
fn a_project_paced_at_one_a_second_keeps_its_pace_across_a_move() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let relay = relayed(&dns, &smtp);
    let Some(mut c) = TestCluster::start(2, move |s| {
        relay(s);
        s.sending.rate_per_second = 1;
    }) else {
        return;
    };
    c.settled(2);
    let (p, owner) = project(&c, &dns);
    let heir = c.other_than(owner);
    let to: Vec<String> = (0..5).map(|i| format!("paced-{i}@example.com")).collect();
    let r = c.node(owner).post(
        "/v1/send",
        &p.secret,
        json!({"to": to, "from": format!("hello@{DOMAIN}"), "subject": "s", "body": "b"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let under_way = eventually(30, || smtp.count(), |n| *n >= 2);
    assert!(under_way >= 2, "the owner is sending");
    // A clean stop hands the project over, its place in the pace with it.
    assert!(c.nodes[owner]
        .sigterm(std::time::Duration::from_secs(30))
        .is_some());
    let got = eventually(60, || smtp.received(), |got| got.len() >= 5);
    assert_eq!(got.len(), 5, "every email arrived once");
    let mut at: Vec<_> = got.iter().map(|m| m.at).collect();
    at.sort();
    let gaps: Vec<u128> = at
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_millis())
        .collect();
    // Paced at 1.02 s; arrivals, not hand-offs, are what the relay sees, and on a busy
    // 2-core machine shared with PostgreSQL one arrival can trail its hand-off by a few
    // hundred ms, so the margin is wide: no two emails close together, move or not.
    // (The move itself takes longer than a period here, so this passes without the
    // handed-over pace too; `a_projects_spent_api_budget...` is the test that needs it.)
    assert!(
        gaps.iter().all(|g| *g >= 600),
        "no burst across the move (gaps in ms): {gaps:?}"
    );
    let h = c.health(heir);
    assert_eq!(
        h["projectsOwned"], 1,
        "the other node took the project: {h}"
    );
}

#[test]
fn a_projects_spent_api_budget_stays_spent_when_it_moves() {
    let Some(mut c) = TestCluster::start(2, |s| s.limits.requests_per_minute = 5) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Acme");
    let owner = c.owner_of(0, &p.secret);
    let heir = c.other_than(owner);
    // owner_of spent one; four more empty the budget.
    for i in 0..4 {
        let r = c.node(owner).get("/contacts?limit=1", &p.secret);
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
    }
    assert_eq!(
        c.node(owner).get("/contacts?limit=1", &p.secret).status,
        429
    );
    assert!(c.nodes[owner]
        .sigterm(std::time::Duration::from_secs(30))
        .is_some());
    let h = eventually(30, || c.health(heir), |h| h["projectsOwned"] == 1);
    assert_eq!(h["projectsOwned"], 1, "{h}");
    let r = c.node(heir).get("/contacts?limit=1", &p.secret);
    assert_eq!(r.status, 429, "the budget came along: {}", r.text);
    assert_eq!(
        r.header("X-Mailroom-Node"),
        Some(format!("node-{heir}").as_str())
    );
}

#[test]
fn a_webhook_delivery_left_waiting_by_a_killed_owner_is_delivered_by_the_next() {
    let Some(mut c) = TestCluster::start(2, |s| {
        s.webhooks.allow_private_addresses = true;
        s.webhooks.retry_seconds = vec![5];
    }) else {
        return;
    };
    c.settled(2);
    let server = mailroom_testkit::HookServer::answering(vec![500, 200]);
    let p = c.node(0).create_project("Acme");
    let owner = c.owner_of(0, &p.secret);
    let r = c.node(owner).post(
        "/webhooks",
        &p.secret,
        json!({"url": server.url("/hook"), "events": ["signup"]}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let r = c.node(owner).post(
        "/v1/track",
        &p.secret,
        json!({"email": "ada@example.com", "event": "signup"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let first = eventually(30, || server.hits(), |h| !h.is_empty());
    assert_eq!(first.len(), 1, "the owner's attempt failed; a retry waits");
    c.nodes[owner].kill9();
    let heir = c.served_elsewhere(c.other_than(owner), &p.secret, owner);
    c.advance(10_000);
    let all = eventually(60, || server.hits(), |h| h.len() >= 2);
    assert_eq!(all.len(), 2, "the new owner retried it");
    assert_eq!(all[0].header("webhook-id"), all[1].header("webhook-id"));
    let listed = c.node(heir).get("/webhooks", &p.secret).json();
    let id = listed["data"]["webhooks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = eventually(
        30,
        || {
            c.node(heir)
                .get(&format!("/webhooks/{id}/deliveries"), &p.secret)
                .json()
        },
        |v| v["data"]["deliveries"][0]["status"] == "DELIVERED",
    );
    assert_eq!(
        done["data"]["deliveries"][0]["status"], "DELIVERED",
        "{done}"
    );
}

#[test]
fn an_owner_paused_past_its_lease_loses_the_project_and_its_writes_are_refused_when_it_wakes() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let relay = relayed(&dns, &smtp);
    let Some(c) = TestCluster::start(3, move |s| {
        relay(s);
        s.sending.rate_per_second = 100;
    }) else {
        return;
    };
    c.settled(3);
    let (p, owner) = project(&c, &dns);
    let via = c.other_than(owner);
    let recipients = campaign::emails("reader", 500);
    import(&c, via, &p, &recipients);
    let cid = id(&campaign::create(c.node(via), &p, json!({})));
    data(&campaign::send(c.node(via), &p, &cid, json!({})), 200);
    eventually(30, || smtp.count(), |n| *n >= 50);
    c.pause(owner, true);
    let heir = c.served_elsewhere(via, &p.secret, owner);
    c.pause(owner, false);
    // Woken, the old owner serves nothing of the project itself: its answers come from
    // the heir, and what it had under way is fenced off.
    let w = c
        .node(owner)
        .post("/contacts", &p.secret, json!({"email": "late@example.com"}));
    assert!([200, 201].contains(&w.status), "{}", w.text);
    assert_eq!(
        w.header("X-Mailroom-Node"),
        Some(format!("node-{heir}").as_str())
    );
    let h = eventually(30, || c.health(owner), |h| h["projectsOwned"] == 0);
    assert_eq!(h["projectsOwned"], 0, "{h}");
    let done = campaign::campaign_when(c.node(via), &p, &cid, "SENT");
    assert_eq!(done["status"], "SENT", "{done}");
    let got = eventually(60, || smtp.received(), |got| tally(got).len() >= 500);
    let copies = tally(&got);
    assert_eq!(copies.len(), 500, "every recipient got the campaign");
    let again = twice(&copies);
    assert!(
        again.len() <= IN_FLIGHT,
        "only the emails in flight at the pause went twice: {again:?}"
    );
}

#[test]
fn a_fourth_node_that_joins_takes_over_its_share_and_nothing_else_moves() {
    let Some(mut c) = TestCluster::start(3, |_| {}) else {
        return;
    };
    c.settled(3);
    let projects: Vec<Project> = (0..24)
        .map(|i| c.node(0).create_project(&format!("P{i}")))
        .collect();
    let before: Vec<usize> = projects.iter().map(|p| c.owner_of(0, &p.secret)).collect();
    let joined = c.add_node();
    c.settled(4);
    let h = eventually(
        30,
        || c.health(joined),
        |h| h["projectsOwned"].as_u64() > Some(0),
    );
    assert!(
        h["projectsOwned"].as_u64() > Some(0),
        "the new node took its share: {h}"
    );
    for (p, was) in projects.iter().zip(&before) {
        let now = eventually(
            30,
            || c.owner_of(0, &p.secret),
            |now| now == was || *now == joined,
        );
        assert!(
            now == *was || now == joined,
            "a project moved from node-{was} to node-{now}"
        );
    }
}

#[test]
fn kill_9_of_the_owner_during_a_workflow_delay_sends_the_delayed_email_once_from_another_node() {
    let (dns, smtp) = (TestDns::start(), SmtpServer::start());
    let Some(mut c) = TestCluster::start(3, relayed(&dns, &smtp)) else {
        return;
    };
    c.settled(3);
    let (p, owner) = project(&c, &dns);
    let via = c.other_than(owner);
    let t = c.node(via).post(
        "/templates",
        &p.secret,
        json!({"name": "Later", "subject": "An hour later", "body": "<p>Later</p>",
               "type": "TRANSACTIONAL", "from": campaign::FROM}),
    );
    assert_eq!(t.status, 201, "{}", t.text);
    let template = id(&t.json());
    let w = c.node(via).post(
        "/workflows",
        &p.secret,
        json!({"name": "Durable", "enabled": true, "triggerEvent": "signup",
               "allowReentry": false, "steps": [
                   {"id": "pause", "type": "DELAY", "config": {"amount": 1, "unit": "hours"}, "next": "send"},
                   {"id": "send", "type": "SEND_EMAIL", "config": {"templateId": template}, "next": null}
               ]}),
    );
    assert_eq!(w.status, 201, "{}", w.text);
    let r = c.node(via).post(
        "/v1/track",
        &p.secret,
        json!({"email": "ada@example.com", "event": "signup"}),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let waiting = eventually(
        30,
        || {
            c.node(via)
                .get(
                    &format!("/workflows/{}/executions", id(&w.json())),
                    &p.secret,
                )
                .json()
        },
        |v: &Value| v["executions"][0]["status"] == "WAITING",
    );
    assert_eq!(waiting["executions"][0]["status"], "WAITING", "{waiting}");
    c.nodes[owner].kill9();
    c.served_elsewhere(via, &p.secret, owner);
    c.advance(3_600_000 + 1_000);
    let got = eventually(
        30,
        || smtp.received(),
        |got| tally(got).contains_key("ada@example.com"),
    );
    assert_eq!(
        tally(&got).get("ada@example.com"),
        Some(&1),
        "the delayed email went out"
    );
    campaign::control(c.node(via), &p, &smtp, "control@example.com");
    assert_eq!(
        tally(&smtp.received()).get("ada@example.com"),
        Some(&1),
        "exactly once"
    );
}

/// The time from `kill -9` of a project's owner to the first successful request for it
/// through another node, for a project of 100,000 contacts (goal: under lease_seconds +
/// 5 s). A measurement, not a check run by CI: docs/performance.md has the figures.
#[test]
#[ignore = "a measurement: cargo test --test api failover_time -- --ignored --nocapture"]
fn failover_time_for_a_project_of_a_hundred_thousand_contacts() {
    const LEASE: u64 = 10;
    let Some(mut c) = TestCluster::start(2, |s| s.cluster.lease_seconds = LEASE) else {
        return;
    };
    c.settled(2);
    let p = c.node(0).create_project("Big");
    let owner = c.owner_of(0, &p.secret);
    let survivor = c.other_than(owner);
    let emails = campaign::emails("big", 100_000);
    let started = std::time::Instant::now();
    import(&c, owner, &p, &emails);
    eprintln!(
        "imported 100,000 contacts in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    c.nodes[owner].kill9();
    let killed = std::time::Instant::now();
    let served = eventually(
        LEASE * 4 + 30,
        || c.node(survivor).get("/contacts?limit=1", &p.secret).status,
        |status| *status == 200,
    );
    let took = killed.elapsed();
    assert_eq!(served, 200, "the project is served again");
    eprintln!(
        "failover: {:.2} s from kill -9 to the first 200 through node-{survivor} (lease_seconds = {LEASE}, goal under {} s)",
        took.as_secs_f64(),
        LEASE + 5
    );
    let total = c.node(survivor).get("/contacts?limit=1", &p.secret).json();
    eprintln!("contacts after failover: {}", total["total"]);
}
