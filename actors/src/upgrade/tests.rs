use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::model::{ContactId, ExecStatus, Execution, ExecutionId, ProjectId, WorkflowId};
use crate::project::counters::read_counter;
use crate::workflow::executions::finished_counter;

/// One execution of `w` in `status`, with its index entry.
fn execution(batch: &mut Batch, p: ProjectId, w: WorkflowId, status: ExecStatus) {
    let e = Execution {
        id: ExecutionId::new(),
        workflow_id: w,
        contact_id: ContactId::new(),
        status,
        current: None,
        started_at: 1,
        completed_at: status.is_final().then_some(2),
        history: Vec::new(),
        wait: None,
    };
    batch.put(keys::execution_of(p, w, e.contact_id, e.id), Vec::new());
    batch.put(keys::execution(p, e.id), e.encode().unwrap());
}

/// A layout-5 store: a project with no workflows, and two projects whose workflows hold
/// `ended` ended and two running executions each, their counters at 1 (layout 5 missed
/// the ends that no step caused). The workflows, in project order.
fn layout_5_store(dir: &Path, ended: usize) -> Vec<(ProjectId, WorkflowId)> {
    let store = SledStore::open(dir, SledConfig::default()).unwrap();
    let mut batch = Batch::new();
    let mut workflows = Vec::new();
    for n in [0, 2, 1] {
        let p = ProjectId::new();
        batch.put(keys::project(p), b"a project".to_vec());
        for _ in 0..n {
            let w = WorkflowId::new();
            batch.put(keys::workflow(p, w), b"a workflow".to_vec());
            for _ in 0..ended {
                execution(&mut batch, p, w, ExecStatus::Completed);
            }
            execution(&mut batch, p, w, ExecStatus::Running);
            execution(&mut batch, p, w, ExecStatus::Waiting);
            batch.put(keys::counter(p, &finished_counter(w)), codec::encode_u64(1));
            workflows.push((p, w));
        }
    }
    batch.put(keys::FORMAT_KEY, 5u32.to_be_bytes().to_vec());
    store.apply(batch).unwrap();
    store.flush_blocking().unwrap();
    workflows
}

fn layout(store: &dyn Store) -> u32 {
    let mark = store.get(keys::FORMAT_KEY).unwrap().unwrap();
    u32::from_be_bytes(mark.try_into().unwrap())
}

fn assert_counted(store: &dyn Store, workflows: &[(ProjectId, WorkflowId)], ended: u64) {
    for (p, w) in workflows {
        assert_eq!(
            read_counter(store, *p, &finished_counter(*w)).unwrap(),
            ended,
            "workflow {w} counts its ended executions"
        );
    }
}

#[test]
fn every_layout_from_the_oldest_upgradable_to_this_one_has_a_migration_in_order() {
    let froms: Vec<u32> = MIGRATIONS.iter().map(|m| m.from).collect();
    let want: Vec<u32> = (keys::OLDEST_UPGRADABLE..keys::FORMAT).collect();
    assert_eq!(froms, want);
}

#[test]
fn a_layout_5_store_opens_with_each_workflows_ended_executions_counted_and_marked_layout_6() {
    let dir = tempfile::tempdir().unwrap();
    let workflows = layout_5_store(dir.path(), 5);
    assert!(
        SledStore::open(dir.path(), SledConfig::default()).is_err(),
        "the plain open refuses the old layout"
    );
    let store = open(dir.path(), SledConfig::default(), 2).unwrap();
    assert_eq!(layout(&*store), keys::FORMAT);
    assert_counted(&*store, &workflows, 5);
    assert_eq!(store.get(keys::UPGRADE_PROGRESS_KEY).unwrap(), None);
    drop(store);
    let again = SledStore::open(dir.path(), SledConfig::default()).unwrap();
    assert_counted(&*again, &workflows, 5);
}

static SLICES_LEFT: AtomicUsize = AtomicUsize::new(0);

/// The 5-to-6 migration, failing once `SLICES_LEFT` slices have been taken: a crash.
fn failing_step(store: &dyn Store, cursor: Option<&[u8]>, slice: usize) -> Result<Slice> {
    if SLICES_LEFT
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_err()
    {
        return Err(Error::storage("the machine went down"));
    }
    v5_to_v6::step(store, cursor, slice)
}

#[test]
fn a_migration_cut_short_resumes_after_its_last_slice_and_counts_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let workflows = layout_5_store(dir.path(), 10);
    let all_records = 3 * 12;
    {
        let (store, found) = SledStore::open_any_layout(dir.path(), SledConfig::default()).unwrap();
        assert_eq!(found, 5);
        SLICES_LEFT.store(4, Ordering::SeqCst);
        let crashing = Migration {
            from: 5,
            what: "fails after four slices",
            step: failing_step,
        };
        assert!(run(&*store, &crashing, 4).is_err());
        store.flush_blocking().unwrap();
        assert!(store.get(keys::UPGRADE_PROGRESS_KEY).unwrap().is_some());
        assert_eq!(layout(&*store), 5, "the mark moves only at the end");
    }
    let (store, found) = SledStore::open_any_layout(dir.path(), SledConfig::default()).unwrap();
    assert_eq!(found, 5);
    let resumed = upgrade(&*store, found, 4).unwrap();
    assert!(
        resumed < all_records,
        "the second run went through {resumed} of {all_records} records"
    );
    assert_eq!(layout(&*store), keys::FORMAT);
    assert_counted(&*store, &workflows, 10);
}

#[test]
fn a_store_of_a_newer_layout_is_refused_naming_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SledStore::open(dir.path(), SledConfig::default()).unwrap();
        let mut batch = Batch::new();
        batch.put(keys::FORMAT_KEY, (keys::FORMAT + 1).to_be_bytes().to_vec());
        store.apply(batch).unwrap();
        store.flush_blocking().unwrap();
    }
    match open(dir.path(), SledConfig::default(), 100) {
        Err(Error::Storage(m)) => {
            let text = m.to_string();
            assert!(
                text.contains("newer Mailroom")
                    && text.contains(&(keys::FORMAT + 1).to_string())
                    && text.contains(&keys::FORMAT.to_string()),
                "{text}"
            );
        }
        Err(other) => panic!("expected a layout error, got {other:?}"),
        Ok(_) => panic!("a newer layout was opened"),
    }
}

/// A measurement, not a check: `cargo test -p mailroom-actors --release -- --ignored
/// upgrade_of_100k_executions --nocapture`.
#[test]
#[ignore = "a measurement: cargo test -p mailroom-actors --release -- --ignored upgrade_of_100k_executions --nocapture"]
fn upgrade_of_100k_executions() {
    let dir = tempfile::tempdir().unwrap();
    let workflows = layout_5_store(dir.path(), 33_331);
    let started = std::time::Instant::now();
    let store = open(dir.path(), SledConfig::default(), 1000).unwrap();
    println!(
        "{} workflows, {} executions: upgraded in {:?}",
        workflows.len(),
        workflows.len() * 33_333,
        started.elapsed()
    );
    assert_counted(&*store, &workflows, 33_331);
}
