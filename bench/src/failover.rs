//! `failover` (needs `--postgres-url`): two nodes of a cluster on one fresh schema, a
//! project of `--contacts` contacts imported through the API, then `kill -9` of the node
//! that owns it. Timed: from the kill to the first 200 for the project through the other
//! node, asked every 50 ms (the goal: under lease_seconds + 5 s), and whether every
//! contact is there.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::server::Server;
use crate::{client, import, postgres};

/// Shared by the two nodes: each proves a forwarded request with it.
const SECRET: &str = "loadgen-failover-secret-0123456789abcdef";

/// How often the surviving node is asked.
const POLL: Duration = Duration::from_millis(50);

/// Runs the scenario on a new schema of the server at `admin_url`.
pub fn run(
    rt: &tokio::runtime::Runtime,
    bin: &Path,
    base_env: &[(String, String)],
    admin_url: &str,
    contacts: u64,
    lease_seconds: u64,
) {
    let mut shared = base_env.to_vec();
    shared.extend(postgres::env(admin_url));
    shared.extend(
        [
            ("MAILROOM__CLUSTER__SECRET", SECRET.to_owned()),
            (
                "MAILROOM__CLUSTER__LEASE_SECONDS",
                lease_seconds.to_string(),
            ),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    // The first node's settings also make the project, with the CLI, before it starts.
    let mut nodes = vec![
        Server::start(bin, &node_env(&shared, "loadgen-a")),
        Server::start_node(bin, &node_env(&shared, "loadgen-b")),
    ];
    let key = nodes[0].secret_key.clone();
    let names = ["loadgen-a", "loadgen-b"];
    for n in &nodes {
        wait_for_live_nodes(rt, n.addr(), 2);
    }

    let done = import::import(rt, nodes[0].addr(), &key, contacts);
    println!(
        "failover: {contacts} contacts imported through {} in {:.1} s ({})",
        names[0],
        done.took.as_secs_f64(),
        done.last["status"]
    );
    let (status, owner, _) = rt.block_on(client::get_served(
        nodes[0].addr(),
        "/contacts?limit=1",
        Some(&key),
    ));
    assert_eq!(status, 200, "reading the project before the kill");
    let owner = owner.expect("X-Mailroom-Node names the node that served the project");
    let owner = names
        .iter()
        .position(|n| *n == owner)
        .unwrap_or_else(|| panic!("not a node of this run: {owner}"));
    let survivor = 1 - owner;

    let killed = Instant::now();
    nodes[owner].kill9();
    let limit = Duration::from_secs(lease_seconds * 4 + 30);
    let (mut tries, mut last) = (0u32, (0, None, serde_json::Value::Null));
    let mut asked = Duration::ZERO;
    while killed.elapsed() < limit {
        tries += 1;
        asked = killed.elapsed();
        last = rt.block_on(client::get_served(
            nodes[survivor].addr(),
            "/contacts?limit=1",
            Some(&key),
        ));
        if last.0 == 200 {
            break;
        }
        std::thread::sleep(POLL);
    }
    let took = killed.elapsed().as_secs_f64();
    let (status, served_by, body) = last;
    let goal = lease_seconds + 5;
    if status != 200 {
        println!(
            "failover: NOT served again within {:.0} s of kill -9 of {} (last answer {status}: {body})",
            limit.as_secs_f64(),
            names[owner]
        );
        return;
    }
    let total = body["total"].as_u64().unwrap_or(0);
    println!(
        "failover: {took:.2} s from kill -9 of the owner {} to the first 200 through {} (lease_seconds = {lease_seconds}, goal under {goal} s: {})",
        names[owner],
        names[survivor],
        if took < goal as f64 { "met" } else { "NOT met" }
    );
    // The survivor holds a request for a project in the middle of a move and routes it
    // again, so one request may span most of the wait.
    println!(
        "failover: served by {} to request {tries}, sent {:.2} s after the kill",
        served_by.as_deref().unwrap_or("?"),
        asked.as_secs_f64()
    );
    println!(
        "failover: {total} of {contacts} contacts there after the failover ({})",
        if total == contacts {
            "all"
        } else {
            "SOME MISSING"
        }
    );
}

/// The shared settings plus one node's own: its id, a port chosen now and the URL the
/// other node reaches it at.
fn node_env(shared: &[(String, String)], id: &str) -> Vec<(String, String)> {
    let port = free_port();
    let mut env = shared.to_vec();
    env.extend(
        [
            ("MAILROOM__CLUSTER__NODE_ID", id.to_owned()),
            ("MAILROOM__SERVER__PORT", port.to_string()),
            (
                "MAILROOM__CLUSTER__ADVERTISE_URL",
                format!("http://127.0.0.1:{port}"),
            ),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Waits (up to 30 s) until the node at `addr` sees `n` live nodes.
fn wait_for_live_nodes(rt: &tokio::runtime::Runtime, addr: SocketAddr, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, health) = rt.block_on(client::call(addr, "GET", "/health", None, None));
        if health["liveNodes"].as_u64() == Some(n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes did not see each other: {health}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
