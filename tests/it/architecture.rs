//! The shape of the crate (docs/architecture.md): dependencies between the
//! top-level modules of `src/` run one way, so they form no cycle, and
//! nothing outside the command line (`cli.rs`, `cli/`, `main.rs`) names
//! `crate::cli`.
//!
//! The graph is read from the source text: every `crate::NAME` (also inside
//! `use crate::{a, b::c}` groups) and every `super::` that climbs out of a
//! top-level module, with comments, string literals and `#[cfg(test)]` items
//! left out. A name that `lib.rs` re-exports (`crate::Error`) counts as the
//! module it comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::support::repo;

/// `from -> to -> where` (the first `file:line` that names `to` in `from`).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// A source file: its path under `src/` (`exec/input.rs`) and its text.
pub(crate) struct Source {
    pub(crate) path: String,
    pub(crate) text: String,
}

#[test]
fn top_level_modules_form_no_cycle() {
    let graph = module_graph(&sources(&repo().join("src")));
    assert!(graph.len() >= 10, "too few modules found: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("{}", describe(&graph, &cycle));
    }
}

#[test]
fn only_the_command_line_names_cli() {
    let graph = module_graph(&sources(&repo().join("src")));
    let offenders: Vec<String> = graph
        .iter()
        .filter(|(from, _)| from.as_str() != "cli")
        .filter_map(|(from, to)| to.get("cli").map(|at| format!("{from} -> cli ({at})")))
        .collect();
    assert!(
        offenders.is_empty(),
        "only the command line may name `crate::cli`:\n  {}",
        offenders.join("\n  ")
    );
}

/// The layers of docs/architecture.md, top first: a module names only
/// modules of lower layers. Modules not listed here are not held to it.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["audit", "suggest"],
    &["error"],
    &["report"],
    &["publish"],
    &["failed"],
    &["verdict"],
    &["engine"],
    &["exec"],
    &["keyindex"],
    &["plan"],
    &["staged"],
    &["check"],
    &["dsl"],
    &["scalar"],
    &["value", "diagnostic", "runkey", "units", "hooks"],
];

#[test]
fn publish_reads_staged_files_and_never_plans() {
    let graph = module_graph(&sources(&repo().join("src")));
    let wrong: Vec<String> = ["plan", "exec", "check", "audit"]
        .iter()
        .filter_map(|m| {
            graph["publish"]
                .get(*m)
                .map(|at| format!("publish -> {m} ({at})"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "publish reads the staged files through `staged` and publishes verdicts; it names no \
         planning or execution stage:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn every_edge_points_down_the_layers() {
    let graph = module_graph(&sources(&repo().join("src")));
    let wrong = upward_edges(&graph, LAYERS);
    assert!(
        wrong.is_empty(),
        "edges against the layers of docs/architecture.md:\n  {}",
        wrong.join("\n  ")
    );
}

/// The edges from a module to one of the same or a higher layer.
fn upward_edges(graph: &Graph, layers: &[&[&str]]) -> Vec<String> {
    let layer = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut out = Vec::new();
    for (from, to) in graph {
        for (to, at) in to {
            if let (Some(f), Some(t)) = (layer(from), layer(to)) {
                if f >= t {
                    out.push(format!("{from} -> {to} ({at})"));
                }
            }
        }
    }
    out
}

// The checker itself: it must see what it is meant to see, and nothing else.

#[test]
fn checker_finds_an_edge_against_the_layers() {
    let files = [
        src("value.rs", "pub enum Value {}\n"),
        src("dsl/ast.rs", "use crate::value::Value;\n"),
        src("units.rs", "pub fn f() {}\n"),
    ];
    assert!(upward_edges(&module_graph(&files), LAYERS).is_empty());
    // A leaf that names a stage above it, and a leaf that names a leaf.
    let mut files = files;
    files[0]
        .text
        .push_str("use crate::dsl::ast::ArithOp;\nuse crate::units::f;\n");
    assert_eq!(
        upward_edges(&module_graph(&files), LAYERS),
        ["value -> dsl (value.rs:2)", "value -> units (value.rs:3)"]
    );
}

fn src(path: &str, text: &str) -> Source {
    Source {
        path: path.to_string(),
        text: text.to_string(),
    }
}

#[test]
fn checker_finds_an_injected_cycle() {
    let files = [
        src("lib.rs", "pub mod check;\npub mod dsl;\npub mod verdict;\n"),
        src("dsl/mod.rs", "pub mod ast;\n"),
        src("dsl/ast.rs", "pub struct Ast;\n"),
        src("check/mod.rs", "use crate::dsl::ast::Ast;\n"),
        src(
            "verdict/judge.rs",
            "use crate::{check, dsl::ast};\nfn f() {}\n",
        ),
    ];
    let graph = module_graph(&files);
    assert_eq!(find_cycle(&graph), None, "{graph:?}");
    // The edge that closes a cycle: check -> verdict.
    let mut files = files;
    files[3]
        .text
        .push_str("\nfn g() { crate::verdict::judge::f() }\n");
    let graph = module_graph(&files);
    let cycle = find_cycle(&graph).expect("check -> verdict -> check is a cycle");
    assert_eq!(cycle, ["check", "verdict", "check"]);
    assert_eq!(
        describe(&graph, &cycle),
        "the top-level modules form a cycle: check -> verdict -> check\n  \
         check -> verdict at check/mod.rs:3\n  \
         verdict -> check at verdict/judge.rs:1\n\
         dependencies run one way (docs/architecture.md): introduce a type \
         between the stages instead of an edge back"
    );
}

#[test]
fn checker_reads_super_and_lib_re_exports() {
    let files = [
        src(
            "lib.rs",
            "pub mod audit;\npub mod error;\npub use error::Error;\n",
        ),
        src("error.rs", "pub enum Error {}\n"),
        // `super::` out of a top-level file is the crate root.
        src("audit.rs", "use super::error;\n"),
        src("audit/joins.rs", "use super::super::exec;\n"),
        src("exec/mod.rs", "fn f() -> crate::Error { todo!() }\n"),
        src("exec/input.rs", "use super::super::audit::{x, y};\n"),
    ];
    let graph = module_graph(&files);
    let edges: Vec<(&str, &str)> = graph
        .iter()
        .flat_map(|(f, t)| t.keys().map(move |t| (f.as_str(), t.as_str())))
        .collect();
    assert_eq!(
        edges,
        [
            ("audit", "error"),
            ("audit", "exec"),
            ("exec", "audit"),
            ("exec", "error")
        ]
    );
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["audit".into(), "exec".into(), "audit".into()])
    );
}

#[test]
fn checker_skips_tests_comments_and_strings() {
    let files = [
        src("lib.rs", "pub mod a;\npub mod b;\npub mod cli;\n"),
        src("b.rs", "pub fn f() {}\n"),
        src(
            "a.rs",
            "//! See [`crate::b`].\n\
             /* crate::b */\n\
             const S: &str = \"crate::b::f\";\n\
             const R: &str = r#\"crate::cli\"#;\n\
             const C: char = '{';\n\
             const Q: (char, u8) = ('\\'', b'{');\n\
             fn lt<'a>(x: &'a str) -> &'a str { x }\n\
             #[cfg(test)]\n\
             mod tests {\n    use crate::b::f;\n    fn g() { let _ = \"}\"; crate::cli::run(); }\n}\n\
             #[cfg(test)]\n\
             use crate::cli::Cli;\n\
             fn h() {}\n",
        ),
    ];
    let graph = module_graph(&files);
    assert!(graph.values().all(BTreeMap::is_empty), "{graph:?}");
    // The same reference outside a test item counts, on its own line.
    let mut files = files;
    files[2].text.push_str("fn k() { crate::b::f() }\n");
    let graph = module_graph(&files);
    assert_eq!(graph["a"].get("b").map(String::as_str), Some("a.rs:16"));
}

/// Every `.rs` file under `dir`, by path relative to it.
pub(crate) fn sources(dir: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("read src/") {
            let path = entry.expect("read src/").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).expect("under src/");
                out.push(Source {
                    path: rel.to_string_lossy().replace('\\', "/"),
                    text: fs::read_to_string(&path).expect("read a source file"),
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The module path of a file: `exec/input.rs` and `exec/input/mod.rs` are
/// `[exec, input]`; `lib.rs` and `main.rs` are the crate root (`[]`).
pub(crate) fn module_path(path: &str) -> Vec<String> {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let mut parts: Vec<String> = path.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The top-level module graph of the files.
fn module_graph(files: &[Source]) -> Graph {
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(&f.path).first().cloned())
        .collect();
    // `pub use error::Error;` in lib.rs: `crate::Error` is `error`'s.
    let mut aliases = BTreeMap::new();
    for f in files.iter().filter(|f| f.path == "lib.rs") {
        for line in blank(&f.text).lines() {
            let Some(rest) = line.trim().strip_prefix("pub use ") else {
                continue;
            };
            let rest = rest.trim_end_matches(';');
            if let (Some((module, _)), Some((_, name))) =
                (rest.split_once("::"), rest.rsplit_once("::"))
            {
                aliases.insert(name.trim().to_string(), module.trim().to_string());
            }
        }
    }
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for f in files {
        let path = module_path(&f.path);
        let Some(from) = path.first() else { continue };
        let code = without_test_items(&blank(&f.text));
        for (offset, name) in references(&code, path.len()) {
            let to = match aliases.get(&name) {
                Some(m) => m.clone(),
                None => name,
            };
            if &to != from && modules.contains(&to) {
                let line = code[..offset].matches('\n').count() + 1;
                let at = format!("{}:{line}", f.path);
                graph
                    .get_mut(from)
                    .expect("every module is a node")
                    .entry(to)
                    .or_insert(at);
            }
        }
    }
    graph
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The text with comments, string literals and character literals replaced
/// by spaces (newlines kept, so byte offsets and line numbers stay).
pub(crate) fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let prev_ident = i > 0 && is_ident(b[i - 1]);
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            wipe(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            wipe(&mut out, i, j);
            i = j;
        } else if !prev_ident && raw_string_start(&b[i..]).is_some() {
            let (skip, hashes) = raw_string_start(&b[i..]).expect("just matched");
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = i + skip;
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| body + p + close.len());
            wipe(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            wipe(&mut out, i, end);
            i = end;
        } else if b[i] == b'\'' && (!prev_ident || byte_prefix(b, i)) {
            // A character literal ('x', '\n', '\u{1F600}', 'é'), not a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                // The escaped character is skipped, so `'\''` closes at its last quote.
                b.get(i + 3..)
                    .and_then(|r| r.iter().position(|&c| c == b'\''))
                    .map(|p| i + 3 + p + 1)
            } else {
                let len = text[i + 1..].chars().next().map_or(0, char::len_utf8);
                (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len + 1)
            };
            match end {
                Some(end) => {
                    wipe(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII was written over whole characters")
}

/// Whether the quote at `i` follows a lone `b` (a byte literal `b'x'`).
fn byte_prefix(b: &[u8], i: usize) -> bool {
    i >= 1 && b[i - 1] == b'b' && (i < 2 || !is_ident(b[i - 2]))
}

/// `r"`, `r#"`, `br"`, `br##"`...: the length of the opening and the number of `#`.
fn raw_string_start(b: &[u8]) -> Option<(usize, usize)> {
    let rest = b.strip_prefix(b"br").or_else(|| b.strip_prefix(b"r"))?;
    let hashes = rest.iter().take_while(|&&c| c == b'#').count();
    (rest.get(hashes) == Some(&b'"')).then_some((b.len() - rest.len() + hashes + 1, hashes))
}

/// The (blanked) code without the items marked `#[cfg(test)]`.
pub(crate) fn without_test_items(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(p) = code[from..].find("#[cfg(test)]") {
        let start = from + p;
        let after = start + "#[cfg(test)]".len();
        let b = code.as_bytes();
        let mut j = after;
        while j < b.len() && b[j] != b';' && b[j] != b'{' {
            j += 1;
        }
        let end = if j < b.len() && b[j] == b'{' {
            let mut depth = 0;
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            (j + 1).min(b.len())
        } else {
            (j + 1).min(b.len())
        };
        for c in &mut out[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).expect("only ASCII was written")
}

/// The crate-level names the code refers to, with their byte offsets:
/// `crate::NAME`, the names of a `crate::{...}` group, and `super::NAME`
/// where enough `super`s climb to the crate root from a module `depth` deep.
fn references(code: &str, depth: usize) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':') {
            i += 1;
            continue;
        }
        let start = i;
        let root = if b[i..].starts_with(b"crate::") {
            i += "crate::".len();
            true
        } else if b[i..].starts_with(b"super::") {
            let mut ups = 0;
            while b[i..].starts_with(b"super::") {
                ups += 1;
                i += "super::".len();
            }
            ups == depth
        } else {
            i += 1;
            continue;
        };
        if !root {
            continue;
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b.get(i) == Some(&b'{') {
            // A group: the first name of each top-level item.
            let mut level = 0;
            let mut item_start = true;
            while i < b.len() {
                match b[i] {
                    b'{' => {
                        level += 1;
                        i += 1;
                    }
                    b'}' => {
                        level -= 1;
                        i += 1;
                        if level == 0 {
                            break;
                        }
                    }
                    b',' if level == 1 => {
                        item_start = true;
                        i += 1;
                    }
                    c if item_start && level == 1 && is_ident(c) => {
                        let end = i + b[i..].iter().take_while(|&&c| is_ident(c)).count();
                        out.push((start, code[i..end].to_string()));
                        item_start = false;
                        i = end;
                    }
                    _ => i += 1,
                }
            }
        } else {
            let end = i + b[i..].iter().take_while(|&&c| is_ident(c)).count();
            if end > i {
                out.push((start, code[i..end].to_string()));
            }
            i = end;
        }
    }
    out
}

/// One cycle of the graph (`[a, b, a]`), the first in name order; `None` when
/// the graph is acyclic.
pub(crate) fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    // Depth-first search; a back edge to a node on the stack closes a cycle.
    fn visit(
        graph: &Graph,
        node: &str,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|n| n == next).expect("on the stack");
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(graph, next, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node) {
            if let Some(c) = visit(graph, node, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The failure message: the cycle and where each of its edges is made.
fn describe(graph: &Graph, cycle: &[String]) -> String {
    let mut s = format!(
        "the top-level modules form a cycle: {}\n",
        cycle.join(" -> ")
    );
    for pair in cycle.windows(2) {
        let at = &graph[&pair[0]][&pair[1]];
        s.push_str(&format!("  {} -> {} at {at}\n", pair[0], pair[1]));
    }
    s.push_str(
        "dependencies run one way (docs/architecture.md): introduce a type \
         between the stages instead of an edge back",
    );
    s
}
