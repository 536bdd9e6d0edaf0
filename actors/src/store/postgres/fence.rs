//! Fencing: a node writes a project only under the lease epoch it holds, and the commit
//! statement checks that epoch (`db::COMMIT`). When the check fails, another node has
//! taken the project: its writes queued here can never land, so they are dropped, with
//! their overlay entries and the fence, the group's other writes are queued again, and
//! the fence-lost hooks are told.
//!
//! "Acknowledged means durable" holds through it. A wait is not tied to one commit,
//! so a waiter that may have had dropped writes must get an error even when a later
//! commit succeeds. Two marks say who may have: a waiter's number (`registered`) in
//! (last number a successful commit covered, number at the drop], and, for a waiter
//! that applied before the drop but began waiting after it, the overlay versions of its
//! applies (first to last) meeting (last committed version, version at the drop].
//! `apply` answers its version and the projects written (`Applied`), and the writer
//! hands it back to
//! `durable_after` (the project actor gathers its applies since its last wait and
//! hands them over together): such a waiter gets `Error::NotOwner` only when it wrote
//! the dropped project. A waiter through `durable()`, which does not say what it wrote
//! (it waits for writes made elsewhere), is failed by any drop in its marks. The
//! commit that found the fence broken goes on with the group's other writes
//! (`Shared::sync`), so their waiters get Ok only once those are committed, and never
//! an error for another tenant's lease.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;

use super::db::Group;
use super::{lock, Shared};
use crate::error::{Error, Result};
use crate::id::ProjectId;
use crate::store::{keys, Applied, Op};

/// How many drops `Shared::lost` keeps. Drops with no successful commit between them
/// are one record, whatever the number of projects, so a waiter would have to stay
/// in flight across this many drops, each after a commit, to miss its own.
const LOST_KEPT: usize = 4096;

/// One drop: which projects, and the waiters it may have failed.
pub struct Lost {
    projects: Vec<ProjectId>,
    /// Waiter numbers in (from, to].
    numbers: (u64, u64),
    /// Overlay versions in (from, to].
    versions: (u64, u64),
}

/// The projects a batch writes.
pub fn projects(ops: &[Op]) -> Vec<ProjectId> {
    let mut found: Vec<ProjectId> = Vec::new();
    for op in ops {
        let (Op::Put(k, _) | Op::Delete(k)) = op;
        if let Some(p) = keys::project_of(k) {
            if !found.contains(&p) {
                found.push(p);
            }
        }
    }
    found
}

/// Refuses a batch that writes a project this node holds no fence for.
pub fn check(ops: &[Op], fences: &HashMap<ProjectId, u64>) -> Result<()> {
    for op in ops {
        let key = match op {
            Op::Put(k, _) | Op::Delete(k) => k,
        };
        if let Some(project) = keys::project_of(key) {
            if !fences.contains_key(&project) {
                return Err(Error::NotOwner { project });
            }
        }
    }
    Ok(())
}

/// The (project, epoch) fences the group's commit checks, and (when `partial`) the
/// projects it writes without a fence.
pub fn of_group(
    group: &Group,
    fences: &HashMap<ProjectId, u64>,
    partial: bool,
) -> (Vec<(ProjectId, u64)>, Vec<ProjectId>) {
    let written: BTreeSet<ProjectId> = group
        .gone
        .iter()
        .chain(&group.keys)
        .filter_map(|k| keys::project_of(k))
        .collect();
    let (mut fenced, mut unfenced) = (Vec::new(), Vec::new());
    for p in written {
        match fences.get(&p) {
            Some(e) => fenced.push((p, *e)),
            None if partial => unfenced.push(p),
            None => {}
        }
    }
    (fenced, unfenced)
}

impl Shared {
    /// Drops every write of `projects` (from the group, the queue and the overlay),
    /// queues the group's other writes again, clears the fences the group checked and
    /// tells the hooks when `broken` (the lease table said no).
    pub(super) fn lose(&self, group: Group, projects: Vec<ProjectId>, broken: bool) {
        let theirs = |k: &[u8]| keys::project_of(k).is_some_and(|p| projects.contains(&p));
        let checked = group.fences.clone();
        self.requeue(group, |k| !theirs(k));
        {
            let mut pending = lock(&self.pending);
            pending.ops.retain(|op| match op {
                Op::Put(k, _) | Op::Delete(k) => !theirs(k),
            });
            pending.overlay.forget(|k| theirs(k));
            for (p, epoch) in checked {
                if projects.contains(&p) && pending.fences.get(&p) == Some(&epoch) {
                    pending.fences.remove(&p);
                }
            }
            self.mark_lost(&projects, pending.overlay.version());
        }
        for p in &projects {
            tracing::warn!(
                project = %p,
                "writes of a project this node no longer holds were dropped: {}",
                if broken {
                    "another node holds its lease now"
                } else {
                    "its fence was cleared before they were committed"
                }
            );
        }
        if broken {
            let hooks = self
                .on_fence_lost
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            for p in &projects {
                for hook in &hooks {
                    hook(*p);
                }
            }
        }
    }

    /// Drops the queued writes and overlay entries of `p` (none when its writes were
    /// made durable first), marking their waiters as failed.
    pub(super) fn drop_pending(&self, p: ProjectId) {
        let theirs = |k: &[u8]| keys::project_of(k) == Some(p);
        let mut pending = lock(&self.pending);
        let before = pending.ops.len();
        pending.ops.retain(|op| match op {
            Op::Put(k, _) | Op::Delete(k) => !theirs(k),
        });
        let dropped = before - pending.ops.len() + pending.overlay.forget(theirs);
        if dropped > 0 {
            tracing::warn!(project = %p, writes = dropped, "dropped writes of a project not yet committed");
            self.mark_lost(&[p], pending.overlay.version());
        }
    }

    /// Called with the pending lock held, so no apply or take happens in between.
    fn mark_lost(&self, projects: &[ProjectId], version: u64) {
        let numbers = (
            self.covered.load(Ordering::SeqCst),
            self.registered.load(Ordering::SeqCst),
        );
        let versions = (self.synced.load(Ordering::SeqCst), version);
        let mut lost = lock(&self.lost);
        match lost.last_mut() {
            // No commit succeeded since the last drop (an outage drops project after
            // project): every write since then is still pending, so each waiter the
            // last drop may have failed may also have lost writes to these projects,
            // and one record says both exactly.
            Some(last) if last.numbers.0 == numbers.0 && last.versions.0 == versions.0 => {
                last.numbers.1 = numbers.1;
                last.versions.1 = versions.1;
                for p in projects {
                    if !last.projects.contains(p) {
                        last.projects.push(*p);
                    }
                }
            }
            _ => lost.push(Lost {
                projects: projects.to_vec(),
                numbers,
                versions,
            }),
        }
        // Bounded: a drop only matters to waiters in flight when it happened, and
        // leases are lost rarely (a pause, a partition), so the oldest of more than
        // LOST_KEPT drops are long answered. Without a bound a node that loses leases
        // over months would keep every one.
        let over = lost.len().saturating_sub(LOST_KEPT);
        lost.drain(..over);
    }

    /// The project a waiter's writes may have been dropped with (`own`: what it says it
    /// applied; None: it does not know, and any dropped write may be its).
    pub(super) fn lost_for(&self, number: u64, own: Option<&Applied>) -> Option<ProjectId> {
        // The versions of the waiter's applies, [first, last]: a drop whose window
        // (from, to] meets them may have taken one.
        let (first, last) = own.map_or((0, 0), |o| (o.first, o.version));
        let lost = lock(&self.lost);
        lost.iter()
            .filter(|l| {
                (l.numbers.0 < number && number <= l.numbers.1)
                    || (last > l.versions.0 && first <= l.versions.1 && last > 0)
            })
            .find_map(|l| {
                l.projects
                    .iter()
                    .find(|p| own.is_none_or(|o| o.projects.contains(p)))
                    .copied()
            })
    }
}
