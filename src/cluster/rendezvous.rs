//! Which live node should own a project: rendezvous (highest random weight) hashing.
//! Each node scores each project; the highest score wins. A node that joins takes only
//! the projects it now scores highest on, and a node that leaves gives away only its own,
//! so a change of membership moves the least it can.

use mailroom_actors::model::ProjectId;
use sha2::{Digest, Sha256};

/// The score of `node` for `project`. SHA-256 rather than the std hasher: every node of
/// a cluster, whatever Rust built it, must compute the same owner.
pub fn score(node: &str, project: ProjectId) -> u64 {
    let mut h = Sha256::new();
    h.update((node.len() as u32).to_be_bytes());
    h.update(node.as_bytes());
    h.update(project.as_bytes());
    let digest = h.finalize();
    u64::from_be_bytes(
        digest[..8]
            .try_into()
            .expect("a SHA-256 digest has 8 bytes"),
    )
}

/// The node of `nodes` that owns `project`, None when there is no node. A tie (never
/// seen in practice) goes to the smaller id, so that every node agrees.
pub fn owner<S: AsRef<str>>(nodes: &[S], project: ProjectId) -> Option<&str> {
    nodes.iter().map(|n| n.as_ref()).max_by(|a, b| {
        score(a, project)
            .cmp(&score(b, project))
            .then_with(|| b.cmp(a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn projects(n: usize) -> Vec<ProjectId> {
        (0..n).map(|_| ProjectId::new()).collect()
    }

    fn owners(nodes: &[&str], projects: &[ProjectId]) -> Vec<String> {
        projects
            .iter()
            .map(|p| owner(nodes, *p).expect("a node").to_owned())
            .collect()
    }

    #[test]
    fn four_nodes_each_own_a_quarter_of_ten_thousand_projects() {
        let ps = projects(10_000);
        let mut counts: HashMap<String, usize> = HashMap::new();
        for o in owners(
            &["node-a:8080", "node-b:8080", "node-c:8080", "node-d:8080"],
            &ps,
        ) {
            *counts.entry(o).or_default() += 1;
        }
        assert_eq!(counts.len(), 4, "{counts:?}");
        for (node, n) in &counts {
            // 2,500 expected; the standard deviation is ~43, so 2,300..2,700 is > 4 sigma.
            assert!((2_300..=2_700).contains(n), "{node} owns {n} of 10,000");
        }
    }

    #[test]
    fn a_fourth_node_that_joins_takes_about_a_quarter_and_only_moves_projects_to_itself() {
        let ps = projects(10_000);
        let before = owners(&["a", "b", "c"], &ps);
        let after = owners(&["a", "b", "c", "d"], &ps);
        let moved: Vec<_> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
        assert!(
            moved.iter().all(|(_, a)| a.as_str() == "d"),
            "a move went elsewhere than the new node"
        );
        assert!(
            (2_300..=2_700).contains(&moved.len()),
            "{} of 10,000 moved",
            moved.len()
        );
    }

    #[test]
    fn a_node_that_leaves_gives_away_only_its_own_projects() {
        let ps = projects(10_000);
        let before = owners(&["a", "b", "c", "d"], &ps);
        let after = owners(&["a", "b", "d"], &ps);
        for (b, a) in before.iter().zip(&after) {
            if b != "c" {
                assert_eq!(b, a, "a project of a node that stayed moved");
            } else {
                assert_ne!(a, "c");
            }
        }
    }

    #[test]
    fn the_owner_does_not_depend_on_the_order_the_nodes_are_listed_in() {
        for p in projects(100) {
            assert_eq!(owner(&["a", "b", "c"], p), owner(&["c", "a", "b"], p));
        }
        assert_eq!(owner::<&str>(&[], ProjectId::new()), None);
    }
}
