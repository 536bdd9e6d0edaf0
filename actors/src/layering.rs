//! The import direction, checked on the sources: no top-level module of the engine
//! names one of a layer above its own (`LAYERS`) or reaches itself through the modules
//! it names, the core's files form no circle either, and the binary never names store keys
//! (it goes through each feature's functions instead). There is no list of circles to
//! tolerate: a new one fails the check at once, and the way out is a hook in the core
//! (`project::hooks`) that the feature implements, or moving the code to its feature.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file that ships: comments and every item under `#[cfg(test)]` left
/// out, item by item (a `mod tests;`, a `mod tests { .. }`, a test-only `use` or `fn`),
/// so that the code after an early test module is still read.
fn shipped_code(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "tests.rs" || name == "proptests.rs" {
        return String::new();
    }
    without_test_items(&std::fs::read_to_string(path).unwrap())
}

/// `text` without comments and without the items `#[cfg(test)]` marks.
fn without_test_items(text: &str) -> String {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        rest = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its first `;` outside braces, or where its first `{` closes.
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn a_test_module_is_left_out_and_the_code_after_it_is_read() {
    let text = "use crate::a::x;\n#[cfg(test)]\nmod contract;\n#[cfg(test)]\nmod tests {\n    use crate::b::y;\n    fn f() { if true { } }\n}\nuse crate::c::z; // crate::d\n";
    let code = without_test_items(text);
    assert_eq!(
        named_heads(&code, "crate::"),
        ["a", "c"]
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        "{code}"
    );
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The modules a piece of code names through `prefix` (`crate::`, `super::`,
/// `crate::project::`): the first word after it (`crate::a::x`), and each head of a
/// group after it (`crate::{a::x, b, c::{y, z}}`). The one import parser of the checks.
fn named_heads(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for after in code.split(prefix).skip(1) {
        let Some(group) = after.strip_prefix('{') else {
            named.insert(
                after
                    .split(|c| !is_word(c))
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
            continue;
        };
        let (mut depth, mut head, mut at_head) = (0, String::new(), true);
        for c in group.chars() {
            if at_head && is_word(c) {
                head.push(c);
                continue;
            }
            if at_head && head.is_empty() && c.is_whitespace() {
                continue;
            }
            if !head.is_empty() {
                named.insert(std::mem::take(&mut head));
            }
            at_head = false;
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => at_head = true,
                _ => {}
            }
        }
        if !head.is_empty() {
            named.insert(head);
        }
    }
    named
}

/// Which modules of the folder `dir` name which others, through any of `prefixes`: a
/// module is a file or a subfolder of `dir` (with everything under it), and the folder's
/// own `lib.rs` or `mod.rs` is none.
fn graph_of(dir: &Path, prefixes: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let top = |p: &Path| -> String {
        let first = p.strip_prefix(dir).unwrap().components().next().unwrap();
        let first = first.as_os_str().to_string_lossy();
        first.strip_suffix(".rs").unwrap_or(&first).to_owned()
    };
    let root = |t: &str| t == "lib" || t == "mod";
    let tops: BTreeSet<String> = files.iter().map(|p| top(p)).filter(|t| !root(t)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> =
        tops.iter().map(|t| (t.clone(), BTreeSet::new())).collect();
    for path in &files {
        let from = top(path);
        if root(&from) {
            continue;
        }
        let code = shipped_code(path);
        for to in prefixes.iter().flat_map(|p| named_heads(&code, p)) {
            if to != from && tops.contains(&to) {
                graph.get_mut(&from).unwrap().insert(to);
            }
        }
    }
    graph
}

/// Which top-level modules each top-level module of the engine names.
fn engine_graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &["crate::"],
    )
}

/// The engine's layers, from the bottom up (docs/architecture.md): a module names
/// modules of its own layer or below, never above. Inside a layer the circle check
/// keeps the direction (a feature that builds on another names it, never back).
const LAYERS: [(&str, &[&str]); 5] = [
    (
        "foundations",
        &[
            "backoff",
            "clock",
            "cluster",
            "codec",
            "dns",
            "error",
            "faults",
            "id",
            "idempotency",
            "json_part",
            "link_generation",
            "links",
            "metrics",
            "model",
            "near_miss",
            "pace",
            "parts",
            "directory",
            "render",
            "reputation",
            "scheduler",
            "sessions",
            "shutdown",
            "store",
            "timestamp",
            "verify",
        ],
    ),
    ("core", &["project"]),
    (
        "features",
        &[
            "campaign",
            "contact",
            "domain",
            "email",
            "event",
            "feedback",
            "mailer",
            "segment",
            "suppression",
            "template",
            "webhooks",
            "workflow",
        ],
    ),
    (
        "cross-cutting",
        &["erasure", "fuzzing", "retention", "upgrade", "wiring"],
    ),
    // The assembly of them all (`Engine::start`), which nothing inside names.
    ("door", &["engine"]),
];

/// Modules that are not part of the shipped engine: this check itself, and the tests of
/// the engine as a whole.
const UNLAYERED: [&str; 2] = ["layering", "engine_tests"];

/// The layer (its place from the bottom) of a module, None when it has none.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

/// Every import from a module to one in a layer above its own, as `from -> to (layer)`.
fn upward_imports(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut up = Vec::new();
    for (from, tos) in graph {
        let Some(own) = layer_of(from) else { continue };
        for to in tos {
            if let Some(theirs) = layer_of(to).filter(|&l| l > own) {
                up.push(format!(
                    "{from} ({}) -> {to} ({})",
                    LAYERS[own].0, LAYERS[theirs].0
                ));
            }
        }
    }
    up
}

#[test]
fn every_module_of_the_engine_has_a_layer() {
    let unplaced: Vec<String> = engine_graph()
        .into_keys()
        .filter(|m| layer_of(m).is_none() && !UNLAYERED.contains(&m.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer (add each to LAYERS in layering.rs): {unplaced:?}"
    );
}

#[test]
fn no_module_of_the_engine_imports_one_of_a_layer_above_its_own() {
    let up = upward_imports(&engine_graph());
    assert!(up.is_empty(), "imports that point up:\n{}", up.join("\n"));
}

#[test]
fn a_planted_upward_import_is_found() {
    let mut graph = engine_graph();
    assert!(upward_imports(&graph).is_empty());
    graph.get_mut("store").unwrap().insert("campaign".into());
    graph.get_mut("project").unwrap().insert("erasure".into());
    assert_eq!(
        upward_imports(&graph),
        [
            "project (core) -> erasure (cross-cutting)",
            "store (foundations) -> campaign (features)"
        ]
    );
}

/// A path from `start` back to itself, if there is one.
fn circle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut todo: Vec<&str> = vec![start];
    while let Some(m) = todo.pop() {
        for next in &graph[m] {
            if next == start {
                let mut path = vec![start.to_owned()];
                let mut at = m;
                while at != start {
                    path.push(at.to_owned());
                    at = came_from[at];
                }
                path.push(start.to_owned());
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(next.as_str()) {
                came_from.insert(next, m);
                todo.push(next);
            }
        }
    }
    None
}

/// Each circle of the graph, as `a -> b -> a`.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    graph
        .keys()
        .filter_map(|m| circle_through(graph, m))
        .map(|path| path.join(" -> "))
        .collect()
}

#[test]
fn no_top_level_module_of_the_engine_imports_one_that_imports_it_back() {
    let graph = engine_graph();
    assert!(
        graph["project"].contains("store") && graph["store"].contains("model"),
        "the graph is read: {graph:?}"
    );
    let circles = circles(&graph);
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_binary_never_names_store_keys() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 10, "the binary's sources are read");
    let naming: Vec<String> = files
        .iter()
        .filter(|p| {
            let code = shipped_code(p);
            code.contains("store::keys")
                || code.split("store::{").skip(1).any(|group| {
                    let group = group.split('}').next().unwrap_or_default();
                    group.split(|c| !is_word(c)).any(|w| w == "keys")
                })
        })
        .map(|p| p.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(naming.is_empty(), "src/ names store::keys: {naming:?}");
    // Nor spells a key out: a global prefix as a byte string, or a project's `p/`.
    let spelled: Vec<String> = files
        .iter()
        .filter(|p| spells_a_store_key(&shipped_code(p)))
        .map(|p| p.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        spelled.is_empty(),
        "src/ spells store keys out: {spelled:?}"
    );
}

/// Whether code holds a byte string that starts like a store key.
fn spells_a_store_key(code: &str) -> bool {
    crate::store::keys::GLOBAL
        .iter()
        .map(|(prefix, _)| *prefix)
        .chain([b"p/".as_slice()])
        .any(|prefix| code.contains(&format!("b\"{}", String::from_utf8_lossy(prefix))))
}

#[test]
fn a_spelled_out_key_prefix_is_found() {
    assert!(spells_a_store_key(r#"store.reload_prefix(b"projects/")"#));
    assert!(spells_a_store_key(r#"[b"keys/".as_slice()]"#));
    assert!(!spells_a_store_key(r#"projects.reload()"#));
}

/// Where a file of the edge sends the project's actor a message itself (`registry.send(`,
/// `registry().send(`, also split over lines), instead of calling its feature's
/// `actions`: the handler would then build the engine's messages and own its rules.
fn sends_to_an_actor(code: &str) -> bool {
    let flat: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    ["registry", "registry()"].iter().any(|r| {
        ["send(", "send_held(", "call(", "send::<"]
            .iter()
            .any(|m| flat.contains(&format!("{r}.{m}")))
    })
}

#[test]
fn no_handler_sends_the_engine_a_message_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let mut files = Vec::new();
    rust_files(&src.join("http"), &mut files);
    rust_files(&src.join("dashboard"), &mut files);
    assert!(files.len() > 20, "the handlers' sources are read");
    let sending: Vec<String> = files
        .iter()
        .filter(|p| sends_to_an_actor(&shipped_code(p)))
        .map(|p| p.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        sending.is_empty(),
        "handlers that send the project's actor a message instead of calling \
         <feature>::actions: {sending:?}"
    );
}

#[test]
fn a_send_split_over_lines_is_still_a_send() {
    assert!(sends_to_an_actor("state\n    .registry\n    .send(p, m)"));
    assert!(sends_to_an_actor("self.registry().send(p, m)"));
    assert!(!sends_to_an_actor("actions::send(&state.registry, p, id)"));
    assert!(!sends_to_an_actor(
        "state.registry.outbox_signal().notify_one()"
    ));
}

#[test]
fn a_group_import_names_each_head() {
    let code = "use crate::{a::x, b, c::{y, z}};\nlet v = crate::d::f();";
    let named: Vec<String> = named_heads(code, "crate::").into_iter().collect();
    assert_eq!(named, ["a", "b", "c", "d"]);
}

#[test]
fn no_module_of_the_core_imports_one_that_imports_it_back() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/project");
    let graph = graph_of(&dir, &["super::", "crate::project::"]);
    assert!(
        graph["unit"].contains("counters"),
        "the graph is read: {graph:?}"
    );
    let circles = circles(&graph);
    assert!(
        circles.is_empty(),
        "import circles in project/:\n{}",
        circles.join("\n")
    );
}
