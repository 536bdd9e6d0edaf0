//! One ProjectActor per project owns that project's writes, so writes to one project
//! are serialised (no two upserts can create the same email twice) while different
//! projects proceed in parallel on different arbiters. Reads go straight to the store,
//! except those that need every contact (segment counts), which read the project's
//! in-memory contact table (`table`).

pub mod actor;
pub mod apply;
pub mod attempts;
pub mod counters;
pub mod events;
pub mod hooks;
pub mod limits;
pub mod messages;
pub mod registry;
pub mod starts;
pub mod table;
mod table_load;
pub mod unit;
pub mod write;

pub use actor::{ActorShared, ProjectActor};
pub use limits::TenantLimits;
pub use registry::{Registry, RegistryConfig};
pub use table::ContactTable;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// Which sibling modules each module of this folder names (`super::x`,
    /// `crate::project::x`, or `x` inside a `super::{...}` group), tests left out.
    fn imports() -> BTreeMap<String, BTreeSet<String>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/project");
        let sources: BTreeMap<String, String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e
                    .file_name()
                    .to_string_lossy()
                    .strip_suffix(".rs")?
                    .to_owned();
                let text = std::fs::read_to_string(e.path()).ok()?;
                let code = text
                    .split("#[cfg(test)]")
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                (name != "mod").then_some((name, code))
            })
            .collect();
        let names: Vec<String> = sources.keys().cloned().collect();
        let words = |s: &str| {
            s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map(str::to_owned)
                .collect::<BTreeSet<_>>()
        };
        sources
            .iter()
            .map(|(module, code)| {
                let mut named = BTreeSet::new();
                for path in code
                    .split("super::")
                    .skip(1)
                    .chain(code.split("crate::project::").skip(1))
                {
                    let head = match path.strip_prefix('{') {
                        Some(group) => group.split('}').next().unwrap_or_default(),
                        None => path
                            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or_default(),
                    };
                    for w in words(head) {
                        if names.contains(&w) && &w != module {
                            named.insert(w);
                        }
                    }
                }
                (module.clone(), named)
            })
            .collect()
    }

    #[test]
    fn no_module_of_the_project_imports_one_that_imports_it_back() {
        let graph = imports();
        for start in graph.keys() {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = graph[start].iter().collect();
            while let Some(m) = todo.pop() {
                assert_ne!(
                    m, start,
                    "{start} reaches itself through its imports: {graph:?}"
                );
                if seen.insert(m.clone()) {
                    todo.extend(graph[m].iter());
                }
            }
        }
        assert!(
            graph["unit"].contains("counters"),
            "the graph is read: {graph:?}"
        );
    }
}
