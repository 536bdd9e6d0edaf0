//! Several nodes on one PostgreSQL schema (docs/cluster.md): `TestCluster::start(3, ..)`
//! starts three servers, each with a data directory of its own, a short lease and the
//! shared secret. Only on the PostgreSQL pass: without `MAILROOM_TEST_POSTGRES_URL`
//! `start` says the test is skipped and answers None.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::app::{TestApp, ADMIN_TOKEN};
use super::campaign::eventually;
use super::postgres;
use super::settings::Setup;

/// Short, so that failover tests wait seconds, not tens of them.
pub const LEASE_SECONDS: u64 = 2;
pub const SECRET: &str = "test-cluster-secret-0123456789abcdefghij";

pub struct TestCluster {
    pub nodes: Vec<TestApp>,
    /// Names the shared schema (`postgres::schema_url` of it).
    shared: PathBuf,
    tmp: tempfile::TempDir,
    configure: Box<dyn Fn(&mut Setup)>,
}

impl TestCluster {
    /// `n` nodes, `node-0` .. `node-{n-1}`, each configured by `configure` too.
    pub fn start(n: usize, configure: impl Fn(&mut Setup) + 'static) -> Option<TestCluster> {
        if postgres::postgres_url().is_none() {
            mailroom_testkit::skipped("cluster tests need PostgreSQL (MAILROOM_TEST_POSTGRES_URL)");
            return None;
        }
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut cluster = TestCluster {
            nodes: Vec::new(),
            shared: tmp.path().join("shared"),
            tmp,
            configure: Box::new(configure),
        };
        for _ in 0..n {
            cluster.add_node();
        }
        Some(cluster)
    }

    /// Starts one more node; its index.
    pub fn add_node(&mut self) -> usize {
        let i = self.nodes.len();
        let url = postgres::schema_url(&self.shared).expect("the PostgreSQL pass");
        let app = TestApp::start(self.tmp.path().join(format!("node-{i}")), |s| {
            s.storage.postgres.url = url;
            s.cluster.node_id = format!("node-{i}");
            s.cluster.secret = SECRET.into();
            s.cluster.lease_seconds = LEASE_SECONDS;
            // A paused owner holds a forwarded request this long.
            s.cluster.forward_timeout_seconds = 3;
            (self.configure)(s);
        });
        self.nodes.push(app);
        i
    }

    /// The CLI with node `i`'s settings and data directory (so it talks to that node's
    /// control socket while it runs).
    pub fn cli(&self, i: usize, args: &[&str]) -> std::process::Output {
        let url = postgres::schema_url(&self.shared).expect("the PostgreSQL pass");
        crate::support::app::mailroom_with(&self.nodes[i].data_dir, args, |s| {
            s.storage.postgres.url = url;
            s.cluster.node_id = format!("node-{i}");
            s.cluster.secret = SECRET.into();
            (self.configure)(s);
        })
    }

    /// The CLI on a machine that has the cluster's settings but runs no node: it writes
    /// to the database itself, one more client of it.
    pub fn cli_without_a_node(&self, args: &[&str]) -> std::process::Output {
        let url = postgres::schema_url(&self.shared).expect("the PostgreSQL pass");
        crate::support::app::mailroom_with(&self.tmp.path().join("cli-only"), args, |s| {
            s.storage.postgres.url = url;
            s.cluster.node_id = "cli".into();
            s.cluster.secret = SECRET.into();
            (self.configure)(s);
        })
    }

    pub fn node(&self, i: usize) -> &TestApp {
        &self.nodes[i]
    }

    /// The index of the node named `id`.
    pub fn index_of(&self, id: &str) -> usize {
        id.strip_prefix("node-")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a test node id: {id}"))
    }

    /// Which node serves the project of `key` now, asked through node `via`.
    pub fn owner_of(&self, via: usize, key: &str) -> usize {
        let r = self.node(via).get("/contacts?limit=1", key);
        assert_eq!(r.status, 200, "{}", r.text);
        self.index_of(r.header("X-Mailroom-Node").expect("X-Mailroom-Node"))
    }

    /// A node other than `i`.
    pub fn other_than(&self, i: usize) -> usize {
        (i + 1) % self.nodes.len()
    }

    /// Waits (with a deadline) until a request through `via` for the project of `key`
    /// succeeds, served by a node other than `gone`; that node's index.
    pub fn served_elsewhere(&self, via: usize, key: &str, gone: usize) -> usize {
        let served = eventually(
            LEASE_SECONDS * 10 + 20,
            || {
                let r = self.node(via).get("/contacts?limit=1", key);
                (r.status, r.header("X-Mailroom-Node").map(str::to_owned))
            },
            |(status, node)| *status == 200 && node.as_deref() != Some(&format!("node-{gone}")),
        );
        assert_eq!(served.0, 200, "the project is served again");
        self.index_of(served.1.as_deref().expect("X-Mailroom-Node"))
    }

    /// /health of node `i`.
    pub fn health(&self, i: usize) -> Value {
        let r = self.node(i).request("GET", "/health", None, None);
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    /// Waits (with a deadline) until every running node sees `n` live nodes: the
    /// cluster agrees on who owns what.
    pub fn settled(&self, n: usize) {
        for i in (0..self.nodes.len()).filter(|i| self.nodes[*i].is_running()) {
            let h = eventually(30, || self.health(i), |h| h["liveNodes"] == n);
            assert_eq!(h["liveNodes"], n, "node-{i} sees every node: {h}");
        }
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`) node `i`.
    pub fn pause(&self, i: usize, stop: bool) {
        let signal = if stop { "-STOP" } else { "-CONT" };
        let sent = Command::new("kill")
            .args([signal, &self.node(i).child_pid().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill {signal}");
    }

    /// Moves every node's clock forward (each has its own adjustable clock).
    pub fn advance(&self, ms: i64) {
        for n in self.nodes.iter().filter(|n| n.is_running()) {
            let r = n.post(
                "/admin/clock/advance",
                ADMIN_TOKEN,
                serde_json::json!({ "ms": ms }),
            );
            assert_eq!(r.status, 200, "{}", r.text);
        }
    }
}
