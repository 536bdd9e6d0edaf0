//! Against a real PostgreSQL: the URL of a role that may create schemas comes from
//! `MAILROOM_TEST_POSTGRES_URL` (`.ci/postgres.sh start` makes a cluster and prints it).
//! Without it these tests say so and pass: `cargo test --workspace` runs them that way,
//! and .ci/run runs them again with a cluster.

use super::*;

/// A fresh schema of its own for each store, so tests do not see each other's keys.
pub(super) async fn config() -> Option<PostgresConfig> {
    let Ok(admin) = std::env::var("MAILROOM_TEST_POSTGRES_URL") else {
        mailroom_testkit::skipped("MAILROOM_TEST_POSTGRES_URL is not set");
        return None;
    };
    let schema = format!("unit_{}", uuid::Uuid::now_v7().simple());
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("connect to MAILROOM_TEST_POSTGRES_URL");
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    let sep = if admin.contains('?') { '&' } else { '?' };
    Some(PostgresConfig {
        url: format!("{admin}{sep}options=-c%20search_path%3D{schema}"),
        pool_size: 2,
        lock_wait_ms: 200,
        statement_timeout_ms: 5_000,
        partial: false,
        tls: Default::default(),
        ca_file: None,
    })
}

fn put(s: &PostgresStore, k: &str, v: &str) {
    let mut b = Batch::new();
    b.put(k.as_bytes(), v.as_bytes());
    s.apply(b).unwrap();
}

use crate::store::contract::keys;

#[tokio::test]
async fn durable_writes_and_deletions_are_there_after_a_reopen() {
    let Some(config) = config().await else { return };
    {
        let s = PostgresStore::open(&config).unwrap();
        put(&s, "k/1", "one");
        put(&s, "k/2", "two");
        s.durable().await.unwrap();
        let mut b = Batch::new();
        b.delete(b"k/1".to_vec());
        b.put(b"k/3".to_vec(), b"three".to_vec());
        s.apply(b).unwrap();
        s.durable().await.unwrap();
    }
    let s = PostgresStore::open(&config).unwrap();
    assert_eq!(keys(s.scan(b"k/", None, false)), ["k/2", "k/3"]);
    assert_eq!(s.get(b"k/3").unwrap(), Some(b"three".to_vec()));
    assert_eq!(
        s.get(keys::FORMAT_KEY).unwrap(),
        Some(keys::FORMAT.to_be_bytes().to_vec()),
        "a new store is marked with the key layout"
    );
}

#[tokio::test]
async fn a_write_never_made_durable_is_visible_but_not_in_postgres() {
    let Some(config) = config().await else { return };
    {
        let s = PostgresStore::open(&config).unwrap();
        put(&s, "k/kept", "v");
        s.durable().await.unwrap();
        put(&s, "k/lost", "v");
        assert_eq!(s.get(b"k/lost").unwrap(), Some(b"v".to_vec()));
    }
    let s = PostgresStore::open(&config).unwrap();
    assert_eq!(keys(s.scan(b"k/", None, false)), ["k/kept"]);
}

#[tokio::test]
async fn a_durable_scan_shows_values_once_committed_and_hides_deletions_at_once() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    crate::store::contract::a_durable_scan_shows_values_once_durable_and_hides_deletions_at_once(
        &*s,
    )
    .await;
}

#[tokio::test]
async fn durable_scans_never_show_an_older_copy_of_a_key_rewritten_since() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    crate::store::contract::an_in_order_durable_scan_stops_at_a_key_rewritten_since(&*s).await;
    crate::store::contract::a_durable_scan_hides_a_key_rewritten_since(&*s).await;
}

#[tokio::test]
async fn scan_walks_a_prefix_both_ways_from_a_cursor_across_chunks() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let mut b = Batch::new();
    let n = CHUNK * 2 + 7;
    for i in 0..n {
        b.put(format!("a/{i:04}").into_bytes(), b"v".to_vec());
    }
    b.put(b"b/1".to_vec(), b"v".to_vec());
    s.apply(b).unwrap();
    s.durable().await.unwrap();
    // One more, not committed: the walk merges it in.
    put(&s, "a/0100x", "v");
    let fwd = keys(s.scan(b"a/", None, false));
    assert_eq!(fwd.len(), n + 1);
    assert!(fwd.windows(2).all(|w| w[0] < w[1]), "in key order");
    let rev = keys(s.scan(b"a/", None, true));
    assert_eq!(rev, fwd.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(
        keys(s.scan(b"a/", Some(b"a/0002"), true)),
        ["a/0001", "a/0000"]
    );
    let after = keys(s.scan(b"a/", Some(b"a/0100"), false));
    assert_eq!(after.first().map(String::as_str), Some("a/0100x"));
    assert_eq!(after.len(), n - 101 + 1);
}

#[tokio::test]
async fn a_snapshot_holds_one_moment_while_writes_go_on() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    for i in 0..600 {
        put(&s, &format!("s/{i:04}"), "old");
    }
    s.durable().await.unwrap();
    put(&s, "s/pending", "applied");
    let snap = s.snapshot().unwrap();
    for i in 0..600 {
        put(&s, &format!("s/{i:04}"), "new");
    }
    s.durable().await.unwrap();
    let pairs: Vec<KvPair> = snap.map(Result::unwrap).collect();
    let values: Vec<&[u8]> = pairs
        .iter()
        .filter(|(k, _)| k.starts_with(b"s/"))
        .map(|(_, v)| v.as_slice())
        .collect();
    assert_eq!(values.len(), 601);
    assert!(values[..600].iter().all(|v| *v == b"old"));
    assert_eq!(values[600], b"applied");
}

#[tokio::test]
async fn two_nodes_open_one_schema_and_each_reads_what_the_other_committed() {
    let Some(config) = config().await else { return };
    let a = PostgresStore::open(&config).unwrap();
    let b = PostgresStore::open(&config).expect("no lock keeps a second node out");
    put(&a, "keys/from-a", "1");
    a.durable().await.unwrap();
    assert_eq!(
        b.get(b"keys/from-a").unwrap(),
        None,
        "b has not read it yet"
    );
    b.reload_prefix(b"keys/").unwrap();
    assert_eq!(b.get(b"keys/from-a").unwrap(), Some(b"1".to_vec()));
}

#[tokio::test]
async fn concurrent_batches_share_commits() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let before = s.shared.transactions.load(Ordering::Relaxed);
    let waits: Vec<_> = (0..200)
        .map(|i| {
            put(&s, &format!("g/{i:03}"), "v");
            s.durable()
        })
        .collect();
    futures_util::future::try_join_all(waits).await.unwrap();
    let made = s.shared.transactions.load(Ordering::Relaxed) - before;
    assert!(
        (1..=10).contains(&made),
        "200 durable batches took {made} transactions"
    );
    drop(s);
    let s = PostgresStore::open(&config).unwrap();
    assert_eq!(s.scan(b"g/", None, false).count(), 200);
}

#[tokio::test]
async fn a_node_does_not_start_beside_a_server_of_the_version_that_locked_its_schema() {
    let Some(config) = config().await else { return };
    let (older, connection) = tokio_postgres::connect(&config.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    // What servers before issue #25 held for as long as they ran.
    older
        .execute(
            "SELECT pg_advisory_lock(1835100524, hashtext(current_schema()))",
            &[],
        )
        .await
        .unwrap();
    match PostgresStore::open(&config) {
        Err(e) => assert!(e.to_string().contains("older version"), "{e}"),
        Ok(_) => panic!("a node started beside an older server"),
    }
    older
        .execute(
            "SELECT pg_advisory_unlock(1835100524, hashtext(current_schema()))",
            &[],
        )
        .await
        .unwrap();
    let _a = PostgresStore::open(&config).expect("starts once the older one is gone");
    let _b = PostgresStore::open(&config).expect("and beside another node");
}

/// A store of a cluster node on the same schema as `config`.
fn node(config: &PostgresConfig) -> Arc<PostgresStore> {
    PostgresStore::open(&PostgresConfig {
        partial: true,
        ..config.clone()
    })
    .unwrap()
}

fn put_key(s: &PostgresStore, k: Vec<u8>, v: &str) -> Result<crate::store::Applied> {
    let mut b = Batch::new();
    b.put(k, v.as_bytes());
    s.apply(b)
}

#[tokio::test]
async fn a_cluster_node_holds_the_global_keys_and_only_the_projects_it_loads() {
    let Some(config) = config().await else { return };
    let (p, q) = (ProjectId::new(), ProjectId::new());
    let e = crate::model::EmailId::new();
    {
        let all = PostgresStore::open(&config).unwrap();
        for (project, v) in [(p, "p"), (q, "q")] {
            put_key(&all, keys::project(project), v).unwrap();
            put_key(&all, keys::counter(project, "contacts"), v).unwrap();
            put_key(&all, keys::outbox(5, project, e), v).unwrap();
            put_key(&all, keys::timer(5, 1, project, e.as_bytes()), v).unwrap();
        }
        all.durable().await.unwrap();
    }
    let n = node(&config);
    assert_eq!(n.get(&keys::project(p)).unwrap(), Some(b"p".to_vec()));
    assert_eq!(n.get(&keys::counter(p, "contacts")).unwrap(), None);
    assert_eq!(n.scan(keys::OUTBOX, None, false).count(), 0);

    n.load_project(p).unwrap();
    assert_eq!(
        n.get(&keys::counter(p, "contacts")).unwrap(),
        Some(b"p".to_vec())
    );
    assert_eq!(n.get(&keys::counter(q, "contacts")).unwrap(), None);
    let outbox: Vec<Vec<u8>> = n
        .scan(keys::OUTBOX, None, false)
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(outbox, [keys::outbox(5, p, e)]);
    assert_eq!(n.scan(keys::TIMERS, None, false).count(), 1);

    n.unload_project(p);
    assert_eq!(n.get(&keys::counter(p, "contacts")).unwrap(), None);
    assert_eq!(n.scan(keys::TIMERS, None, false).count(), 0);
    assert_eq!(
        n.get(&keys::project(p)).unwrap(),
        Some(b"p".to_vec()),
        "the global keys stay"
    );
}

#[tokio::test]
async fn a_cluster_node_refuses_writes_to_a_project_it_holds_no_fence_for() {
    let Some(config) = config().await else { return };
    let n = node(&config);
    let p = ProjectId::new();
    match put_key(&n, keys::counter(p, "contacts"), "1") {
        Err(Error::NotOwner { project }) => assert_eq!(project, p),
        other => panic!("expected NotOwner, got {other:?}"),
    }
    put_key(&n, keys::project(p), "global keys need no fence").unwrap();
    let leases = n.cluster().unwrap();
    let epoch = leases.try_acquire(p, "n", 30).await.unwrap().unwrap();
    n.set_fence(p, Some(epoch));
    put_key(&n, keys::counter(p, "contacts"), "1").unwrap();
    n.durable().await.unwrap();
}

#[tokio::test]
async fn renewing_every_lease_at_once_renews_ours_and_names_the_ones_lost() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let leases = s.cluster().expect("PostgreSQL has a lease table");
    leases.heartbeat("a", "http://a").await.unwrap();
    leases.heartbeat("b", "http://b").await.unwrap();
    let (kept, lost) = (ProjectId::new(), ProjectId::new());
    let k = leases.try_acquire(kept, "a", 30).await.unwrap().unwrap();
    let l = leases.try_acquire(lost, "a", 30).await.unwrap().unwrap();
    leases.release(lost, "a", l).await.unwrap();
    let theirs = leases.try_acquire(lost, "b", 30).await.unwrap().unwrap();
    let gone = leases
        .renew_all(vec![(kept, k), (lost, l)], "a", 0)
        .await
        .unwrap();
    assert_eq!(gone, [lost], "only the lease b took is lost");
    // Renewed for no seconds: kept ran out, so b may take it now; b's own is untouched.
    assert_eq!(
        leases.try_acquire(kept, "b", 30).await.unwrap(),
        Some(k + 1)
    );
    assert!(leases.renew(lost, "b", theirs, 30).await.unwrap());
    assert!(leases
        .renew_all(Vec::new(), "a", 30)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_lease_is_taken_renewed_released_and_taken_over_only_once_expired() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let leases = s.cluster().expect("PostgreSQL has a lease table");
    let p = ProjectId::new();
    leases.heartbeat("a", "http://a").await.unwrap();
    leases.heartbeat("b", "http://b").await.unwrap();
    let live = leases.live_nodes(30).await.unwrap();
    assert_eq!(
        live.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(leases.holder(p).await.unwrap(), None);

    let first = leases.try_acquire(p, "a", 30).await.unwrap();
    assert_eq!(first, Some(1));
    assert_eq!(
        leases.try_acquire(p, "a", 30).await.unwrap(),
        Some(1),
        "ours still"
    );
    assert_eq!(
        leases.try_acquire(p, "b", 30).await.unwrap(),
        None,
        "a live lease"
    );
    assert!(leases.renew(p, "a", 1, 30).await.unwrap());
    assert!(!leases.renew(p, "b", 1, 30).await.unwrap());
    let (holder, url, expires) = leases.holder(p).await.unwrap().unwrap();
    assert_eq!((holder.as_str(), url.as_str()), ("a", "http://a"));
    assert!(expires > 0);
    assert_eq!(leases.leases_of("a").await.unwrap(), [(p, 1)]);

    leases.release(p, "a", 1).await.unwrap();
    assert_eq!(
        leases.try_acquire(p, "b", 30).await.unwrap(),
        Some(2),
        "a released lease is taken at once, under a new epoch"
    );
    assert!(!leases.renew(p, "a", 1, 30).await.unwrap(), "a lost it");
    assert!(leases.leases_of("a").await.unwrap().is_empty());

    // A lease of no seconds runs out at once: as if b had stopped renewing.
    assert!(leases.renew(p, "b", 2, 0).await.unwrap());
    assert_eq!(leases.try_acquire(p, "a", 30).await.unwrap(), Some(3));
    assert!(
        leases.live_nodes(0).await.unwrap().is_empty(),
        "no beat is that fresh"
    );
}

/// Waits (at most 10 s) for `f` to answer Some.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "{what} within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_second_process_of_one_node_takes_a_paused_ones_lease_only_once_it_ran_out_and_under_a_new_epoch(
) {
    let Some(config) = config().await else { return };
    // Two processes with one node id: `paused` stands for one stopped with SIGSTOP (its
    // connections stay open), `replacement` for the one a supervisor started beside it.
    let (paused, replacement) = (node(&config), node(&config));
    let p = ProjectId::new();
    let theirs = paused.cluster().unwrap();
    let held = theirs.try_acquire(p, "a", 30).await.unwrap().unwrap();
    paused.set_fence(p, Some(held));
    paused.load_project(p).unwrap();
    put_key(&paused, keys::counter(p, "contacts"), "before").unwrap();
    paused.durable().await.unwrap();

    let ours = replacement.cluster().unwrap();
    assert_eq!(
        ours.try_acquire(p, "a", 30).await.unwrap(),
        None,
        "a running lease of a process still connected is not taken, even by its node id"
    );
    assert!(
        theirs.renew(p, "a", held, 0).await.unwrap(),
        "it runs out now"
    );
    let taken = ours.try_acquire(p, "a", 30).await.unwrap().unwrap();
    assert!(taken > held, "a new process holds it under a new epoch");
    assert!(
        !theirs.renew(p, "a", held, 30).await.unwrap(),
        "the paused process cannot renew it under its node id"
    );
    theirs.release(p, "a", held).await.unwrap();
    assert!(ours.renew(p, "a", taken, 30).await.unwrap(), "nor end it");
    assert_eq!(
        theirs.try_acquire(p, "a", 30).await.unwrap(),
        None,
        "nor take it back while the replacement is connected"
    );

    put_key(&paused, keys::counter(p, "contacts"), "after the pause").unwrap();
    match paused.durable().await {
        Err(Error::NotOwner { project }) => assert_eq!(project, p),
        other => panic!("the paused process's write went through: {other:?}"),
    }
    replacement.set_fence(p, Some(taken));
    replacement.load_project(p).unwrap();
    assert_eq!(
        replacement.get(&keys::counter(p, "contacts")).unwrap(),
        Some(b"before".to_vec())
    );
}

#[tokio::test]
async fn a_restarted_process_of_one_node_takes_its_killed_predecessors_running_lease_at_once() {
    let Some(config) = config().await else { return };
    let p = ProjectId::new();
    let killed = node(&config);
    let held = killed
        .cluster()
        .unwrap()
        .try_acquire(p, "a", 600)
        .await
        .unwrap()
        .unwrap();
    // Dropping the store closes its connections, as the kernel does for a killed process.
    drop(killed);
    let restarted = node(&config);
    let leases = restarted.cluster().unwrap();
    let taken = eventually("the server sees the old connections closed", || {
        let leases = leases.clone();
        async move { leases.try_acquire(p, "a", 30).await.unwrap() }
    })
    .await;
    assert!(taken > held, "under a new epoch: {taken} after {held}");
    assert_eq!(
        leases.try_acquire(p, "b", 30).await.unwrap(),
        None,
        "another node still waits for it to run out"
    );
}

#[tokio::test]
async fn nodes_racing_for_a_free_lease_leave_exactly_one_holder() {
    let Some(config) = config().await else { return };
    let s = PostgresStore::open(&config).unwrap();
    let leases = s.cluster().unwrap();
    for round in 0..5 {
        let p = ProjectId::new();
        let tries: Vec<_> = (0..8)
            .map(|n| leases.try_acquire(p, &format!("node-{n}"), 30))
            .collect();
        let won: Vec<(usize, u64)> = futures_util::future::try_join_all(tries)
            .await
            .unwrap()
            .into_iter()
            .enumerate()
            .filter_map(|(n, e)| e.map(|e| (n, e)))
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        let (winner, epoch) = won[0];
        assert_eq!(epoch, 1);
        for n in 0..8 {
            let held = leases.leases_of(&format!("node-{n}")).await.unwrap();
            let holds_p = held.iter().any(|(q, _)| *q == p);
            assert_eq!(holds_p, n == winner, "round {round}, node-{n}: {held:?}");
        }
    }
}

#[tokio::test]
async fn after_a_takeover_the_old_holders_writes_are_refused_and_the_new_holders_land() {
    let Some(config) = config().await else { return };
    let (a, b) = (node(&config), node(&config));
    let leases = a.cluster().unwrap();
    let (p, q) = (ProjectId::new(), ProjectId::new());
    let lost = Arc::new(Mutex::new(Vec::new()));
    let told = lost.clone();
    a.on_fence_lost(Arc::new(move |p| lock(&told).push(p)));

    // a holds p (a lease that has already run out, as if a were paused) and q.
    let old = leases.try_acquire(p, "a", 0).await.unwrap().unwrap();
    let held = leases.try_acquire(q, "a", 30).await.unwrap().unwrap();
    a.set_fence(p, Some(old));
    a.set_fence(q, Some(held));
    a.load_project(p).unwrap();
    put_key(&a, keys::counter(p, "contacts"), "a, before").unwrap();
    a.durable().await.unwrap();

    let new = b
        .cluster()
        .unwrap()
        .try_acquire(p, "b", 30)
        .await
        .unwrap()
        .unwrap();
    assert!(new > old);
    b.set_fence(p, Some(new));
    b.load_project(p).unwrap();
    assert_eq!(
        b.get(&keys::counter(p, "contacts")).unwrap(),
        Some(b"a, before".to_vec()),
        "the new holder reads what the old one committed"
    );

    let mut late = Batch::new();
    late.put(keys::counter(p, "contacts"), b"a, late".to_vec());
    a.apply(late).unwrap();
    put_key(&a, keys::counter(q, "contacts"), "q, meanwhile").unwrap();
    match a.durable().await {
        Err(Error::NotOwner { project }) => assert_eq!(project, p),
        other => panic!("the old holder's commit went through: {other:?}"),
    }
    assert_eq!(*lock(&lost), [p], "the engine is told");
    assert_eq!(
        a.get(&keys::counter(p, "contacts")).unwrap(),
        Some(b"a, before".to_vec()),
        "the refused write is no longer shown"
    );
    assert!(
        matches!(
            put_key(&a, keys::counter(p, "x"), "1"),
            Err(Error::NotOwner { .. })
        ),
        "its fence is cleared"
    );
    a.durable()
        .await
        .expect("the other project's writes are committed with the next flush");

    put_key(&b, keys::counter(p, "contacts"), "b").unwrap();
    b.durable().await.unwrap();
    let check = PostgresStore::open(&config).unwrap();
    assert_eq!(
        check.get(&keys::counter(p, "contacts")).unwrap(),
        Some(b"b".to_vec())
    );
    assert_eq!(
        check.get(&keys::counter(q, "contacts")).unwrap(),
        Some(b"q, meanwhile".to_vec())
    );
}

#[tokio::test]
async fn a_waiter_whose_write_was_dropped_gets_an_error_even_after_a_later_commit_succeeds() {
    let Some(config) = config().await else { return };
    let (a, b) = (node(&config), node(&config));
    let (p, q) = (ProjectId::new(), ProjectId::new());
    let (tx, mut told) = tokio::sync::mpsc::unbounded_channel();
    a.on_fence_lost(Arc::new(move |p| {
        let _ = tx.send(p);
    }));
    paused_holder_loses_p(&a, &b, p, q).await;

    let dropped = put_key(&a, keys::counter(p, "contacts"), "dropped").unwrap();
    let first = a.durable_after(dropped);
    let lost = tokio::time::timeout(std::time::Duration::from_secs(10), told.recv())
        .await
        .expect("the broken fence is found within 10 s");
    assert_eq!(lost, Some(p));
    let kept = put_key(&a, keys::counter(q, "contacts"), "kept").unwrap();
    a.durable_after(kept)
        .await
        .expect("a write made after the drop is committed");
    match first.await {
        Err(Error::NotOwner { project }) => assert_eq!(project, p),
        other => panic!("the dropped write's waiter was told {other:?}"),
    }
}

/// `a` holds `p` under a lease that has already run out (as if `a` were paused) and
/// `q` under a live one, each fenced; then `b` takes `p` over and fences it.
async fn paused_holder_loses_p(a: &PostgresStore, b: &PostgresStore, p: ProjectId, q: ProjectId) {
    let ours = a.cluster().unwrap();
    let old = ours.try_acquire(p, "a", 0).await.unwrap().unwrap();
    a.set_fence(p, Some(old));
    a.set_fence(q, ours.try_acquire(q, "a", 30).await.unwrap());
    let new = b
        .cluster()
        .unwrap()
        .try_acquire(p, "b", 30)
        .await
        .unwrap()
        .unwrap();
    b.set_fence(p, Some(new));
}

#[tokio::test]
async fn a_broken_fence_fails_only_the_waiters_that_wrote_its_project() {
    let Some(config) = config().await else { return };
    let (a, b) = (node(&config), node(&config));
    let (p, q) = (ProjectId::new(), ProjectId::new());
    paused_holder_loses_p(&a, &b, p, q).await;

    // Two tenants' writers on threads of their own (as two actors are), both applied
    // before either waits, so one commit carries both. Each waits for what its apply
    // answered, as an actor does.
    let both_applied = Arc::new(std::sync::Barrier::new(2));
    let writer = |project: ProjectId, value: &'static str| {
        let (store, both_applied) = (a.clone(), both_applied.clone());
        std::thread::spawn(move || {
            let applied = put_key(&store, keys::counter(project, "contacts"), value).unwrap();
            both_applied.wait();
            store.durable_after(applied)
        })
    };
    let (lost, kept) = (writer(p, "old holder"), writer(q, "other tenant"));
    let (lost, kept) = (lost.join().unwrap(), kept.join().unwrap());

    kept.await
        .expect("a write of another project is acknowledged, not failed with the lost one");
    match lost.await {
        Err(Error::NotOwner { project }) => assert_eq!(project, p),
        other => panic!("the write of the lost project was told {other:?}"),
    }
    let check = PostgresStore::open(&config).unwrap();
    assert_eq!(
        check.get(&keys::counter(q, "contacts")).unwrap(),
        Some(b"other tenant".to_vec()),
        "the acknowledged write is in PostgreSQL"
    );
    assert_eq!(check.get(&keys::counter(p, "contacts")).unwrap(), None);
}

#[tokio::test]
async fn a_waiter_that_does_not_say_what_it_wrote_is_failed_by_any_dropped_write() {
    let Some(config) = config().await else { return };
    let (a, b) = (node(&config), node(&config));
    let (p, q) = (ProjectId::new(), ProjectId::new());
    paused_holder_loses_p(&a, &b, p, q).await;
    put_key(&a, keys::counter(p, "contacts"), "old holder").unwrap();
    let kept = put_key(&a, keys::counter(q, "contacts"), "other tenant").unwrap();
    let (unknown, known) = (a.durable(), a.durable_after(kept));
    match unknown.await {
        Err(Error::NotOwner { project }) => assert_eq!(project, p),
        other => panic!("a waiter whose writes are unknown was told {other:?}"),
    }
    known
        .await
        .expect("the waiter that named its writes (q's) is acknowledged");
}

#[tokio::test]
async fn a_commit_and_a_lease_call_that_the_server_holds_up_fail_in_time_as_unavailable() {
    let Some(config) = config().await else { return };
    let config = PostgresConfig {
        statement_timeout_ms: 300,
        ..config
    };
    let s = PostgresStore::open(&config).unwrap();
    let leases = s.cluster().unwrap();
    let p = ProjectId::new();
    leases.try_acquire(p, "a", 30).await.unwrap();
    // Another session holds both tables, as a stuck server would.
    let (mut blocker, connection) = tokio_postgres::connect(&config.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let tx = blocker.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE kv, mailroom_leases IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    let started = std::time::Instant::now();
    put(&s, "k/held-up", "v");
    let commit = s
        .durable()
        .await
        .expect_err("a commit the server holds up fails");
    let lease = leases
        .renew(p, "a", 1, 30)
        .await
        .expect_err("so does a lease call");
    let took = started.elapsed();
    assert!(commit.is_unavailable(), "{commit:?}");
    assert!(lease.is_unavailable(), "{lease:?}");
    assert!(
        took < std::time::Duration::from_secs(4),
        "both within their limits: {took:?}"
    );

    tx.rollback().await.unwrap();
    s.durable()
        .await
        .expect("the held-up write is committed once the server answers");
    assert!(leases.renew(p, "a", 1, 30).await.unwrap());
    drop(s);
    let check = PostgresStore::open(&config).unwrap();
    assert_eq!(check.get(b"k/held-up").unwrap(), Some(b"v".to_vec()));
}

#[tokio::test]
async fn a_reload_of_ten_thousand_keys_holds_up_no_commit_and_undoes_none() {
    let Some(config) = config().await else { return };
    {
        let all = PostgresStore::open(&config).unwrap();
        let mut b = Batch::new();
        for i in 0..10_000 {
            b.put(format!("keys/{i:05}").into_bytes(), b"other node".to_vec());
        }
        all.apply(b).unwrap();
        all.durable().await.unwrap();
    }
    let n = node(&config);
    let reloader = n.clone();
    let reload = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        for _ in 0..5 {
            reloader.reload_prefix(b"keys/").unwrap();
        }
        started.elapsed() / 5
    });
    let (mut slowest, mut last) = (std::time::Duration::ZERO, 0);
    while !reload.is_finished() {
        last += 1;
        put(&n, "keys/00000", &format!("this node, write {last}"));
        let started = std::time::Instant::now();
        n.durable().await.unwrap();
        slowest = slowest.max(started.elapsed());
    }
    let per_reload = reload.join().unwrap();
    println!(
        "reload of 10,000 keys: {per_reload:?} each; slowest commit meanwhile: {slowest:?} \
         ({last} commits)"
    );
    assert_eq!(
        n.get(b"keys/00000").unwrap(),
        Some(format!("this node, write {last}").into_bytes()),
        "a reload never puts back a value older than one this node committed"
    );
    assert_eq!(n.scan(b"keys/", None, false).count(), 10_000);
}

#[tokio::test]
async fn nodes_racing_to_create_a_global_key_all_end_up_with_the_one_that_won() {
    let Some(config) = config().await else { return };
    let nodes: Vec<Arc<PostgresStore>> = (0..8).map(|_| node(&config)).collect();
    let start = Arc::new(std::sync::Barrier::new(nodes.len()));
    let racers: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (n, start) = (n.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                n.put_if_absent(b"meta/link-key", format!("node {i}").as_bytes())
                    .unwrap()
            })
        })
        .collect();
    let answers: Vec<Vec<u8>> = racers.into_iter().map(|r| r.join().unwrap()).collect();
    assert!(
        answers.iter().all(|a| *a == answers[0]),
        "one value for all: {answers:?}"
    );
    for n in &nodes {
        assert_eq!(n.get(b"meta/link-key").unwrap(), Some(answers[0].clone()));
    }
    let later = PostgresStore::open(&config).unwrap();
    assert_eq!(
        later
            .put_if_absent(b"meta/link-key", b"a latecomer")
            .unwrap(),
        answers[0]
    );
    assert!(
        later
            .put_if_absent(&keys::counter(ProjectId::new(), "x"), b"1")
            .is_err(),
        "a project's key is not for it"
    );
}

/// How long a node takes to load a project of 100,000 contacts (each a record and an
/// email index entry) when it takes the project over (docs/performance.md).
#[tokio::test]
#[ignore = "a measurement: cargo test -p mailroom-actors load_of_a_large_project -- --ignored --nocapture"]
async fn load_of_a_large_project() {
    let Some(config) = config().await else { return };
    let p = ProjectId::new();
    {
        let all = PostgresStore::open(&config).unwrap();
        for chunk in 0..10 {
            let mut b = Batch::new();
            for i in 0..10_000 {
                let c = crate::model::ContactId::new();
                b.put(keys::contact(p, c), vec![7u8; 120]);
                b.put(
                    keys::contact_by_email(p, &format!("c{chunk}-{i}@example.com")),
                    c.as_bytes().to_vec(),
                );
            }
            all.apply(b).unwrap();
            all.durable().await.unwrap();
        }
    }
    let n = node(&config);
    let leases = n.cluster().unwrap();
    let started = std::time::Instant::now();
    let epoch = leases.try_acquire(p, "n", 30).await.unwrap().unwrap();
    n.set_fence(p, Some(epoch));
    let acquired = started.elapsed();
    let loader = n.clone();
    tokio::task::spawn_blocking(move || loader.load_project(p))
        .await
        .unwrap()
        .unwrap();
    let loaded = started.elapsed();
    assert_eq!(n.scan(&keys::contacts(p), None, false).count(), 100_000);
    println!(
        "lease taken in {} ms; 200,000 pairs of the project loaded {} ms after the start",
        acquired.as_millis(),
        loaded.as_millis()
    );
}

#[tokio::test]
async fn migration_2_names_the_project_of_every_stored_pair() {
    let Some(config) = config().await else { return };
    let (p, e) = (ProjectId::new(), crate::model::EmailId::new());
    let (client, connection) = tokio_postgres::connect(&config.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    // A store as version 1 left it.
    client
        .batch_execute(
            "CREATE TABLE kv (key bytea PRIMARY KEY, value bytea NOT NULL); \
             CREATE TABLE mailroom_schema (version integer NOT NULL); \
             INSERT INTO mailroom_schema VALUES (1)",
        )
        .await
        .unwrap();
    let pairs = [
        (
            keys::FORMAT_KEY.to_vec(),
            keys::FORMAT.to_be_bytes().to_vec(),
        ),
        (keys::project(p), b"record".to_vec()),
        (
            keys::contact(p, crate::model::ContactId::new()),
            b"c".to_vec(),
        ),
        (keys::outbox(9, p, e), b"o".to_vec()),
        (keys::timer(9, 1, p, e.as_bytes()), b"t".to_vec()),
    ];
    for (k, v) in &pairs {
        client
            .execute(
                "INSERT INTO kv (key, value) VALUES ($1, $2)",
                &[&k.as_slice(), &v.as_slice()],
            )
            .await
            .unwrap();
    }
    drop(PostgresStore::open(&config).unwrap());
    let named: Vec<(Vec<u8>, Option<Vec<u8>>)> = client
        .query("SELECT key, project FROM kv ORDER BY key", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut expected: Vec<(Vec<u8>, Option<Vec<u8>>)> = pairs
        .iter()
        .map(|(k, _)| {
            (
                k.clone(),
                keys::project_of(k).map(|p| p.as_bytes().to_vec()),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(named, expected);
    assert_eq!(named.iter().filter(|(_, p)| p.is_some()).count(), 3);
}

/// Durable single-put batches per second through the trait, one writer after another
/// and 64 at once: on PostgreSQL with global keys (no fence), on a cluster node whose
/// writers each write a project of their own under its lease (64 fences a commit at
/// most), and on sled, in the same run (docs/performance.md).
#[tokio::test]
#[ignore = "a measurement: cargo test -p mailroom-actors commit_rate -- --ignored --nocapture"]
async fn commit_rate_of_small_durable_batches() {
    let Some(config) = config().await else { return };
    let pg = PostgresStore::open(&config).unwrap();
    let fenced = node(&config);
    let leases = fenced.cluster().unwrap();
    let projects: Arc<Vec<ProjectId>> = Arc::new((0..64).map(|_| ProjectId::new()).collect());
    for p in projects.iter() {
        let epoch = leases.try_acquire(*p, "bench", 600).await.unwrap().unwrap();
        fenced.set_fence(*p, Some(epoch));
    }
    let dir = tempfile::tempdir().unwrap();
    let sled = crate::store::SledStore::open(dir.path(), 64 << 20).unwrap();
    type KeyOf = fn(&[ProjectId], u32, u32) -> Vec<u8>;
    let global: KeyOf = |_, w, i| format!("par/{w:02}/{i:06}").into_bytes();
    let in_project: KeyOf = |ps, w, i| keys::counter(ps[w as usize], &format!("{i:06}"));
    for (name, store, key_of) in [
        ("postgres", pg as Arc<dyn Store>, global),
        ("postgres fenced", fenced as Arc<dyn Store>, in_project),
        ("sled", sled as Arc<dyn Store>, global),
    ] {
        let started = std::time::Instant::now();
        for i in 0..300u32 {
            let mut b = Batch::new();
            b.put(key_of(&projects, 0, 1_000_000 + i), vec![7u8; 100]);
            store.apply(b).unwrap();
            store.durable().await.unwrap();
        }
        let one = 300.0 / started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        let writers: Vec<_> = (0..64u32)
            .map(|w| {
                let (store, projects) = (store.clone(), projects.clone());
                tokio::spawn(async move {
                    for i in 0..100u32 {
                        let mut b = Batch::new();
                        b.put(key_of(&projects, w, i), vec![7u8; 100]);
                        store.apply(b).unwrap();
                        store.durable().await.unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let many = 6400.0 / started.elapsed().as_secs_f64();
        println!("{name}: {one:.0} durable batches/s one at a time, {many:.0}/s from 64 writers");
    }
}

#[tokio::test]
async fn the_schema_is_migrated_once_and_a_newer_one_is_refused() {
    let Some(config) = config().await else { return };
    drop(PostgresStore::open(&config).unwrap());
    drop(PostgresStore::open(&config).unwrap());
    let (client, connection) = tokio_postgres::connect(&config.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let versions: Vec<i32> = client
        .query("SELECT version FROM mailroom_schema", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        versions,
        [SCHEMA_VERSION],
        "one row, at this build's version"
    );
    client
        .execute("UPDATE mailroom_schema SET version = version + 1", &[])
        .await
        .unwrap();
    match PostgresStore::open(&config) {
        Err(e) => assert!(e.to_string().contains("newer Mailroom"), "{e}"),
        Ok(_) => panic!("a schema of a newer version was opened"),
    }
}
