//! The shape of the crate file by file (docs/architecture.md): no file-level
//! cycle anywhere in `src/`. A file names another when it refers to an item
//! defined there, through `crate::`, `super::`, `self::` or a child module's
//! name (also inside `use a::{b, c::d}` groups). A `pub use` re-export is
//! transparent: it is no edge itself, and a name it re-exports counts as the
//! file that defines it, so a `mod.rs` that only declares and re-exports its
//! children is a folder, not a node that closes cycles. Comments, strings
//! and `#[cfg(test)]` items are left out, as in `architecture.rs`. And no
//! file is over 600 lines before its tests.

use std::collections::{BTreeMap, BTreeSet};

use crate::architecture::{blank, find_cycle, module_path, sources, without_test_items, Source};
use crate::support::repo;

/// `file -> file -> where` (the first `file:line` of the edge).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn files_form_no_cycle() {
    let graph = file_graph(&sources(&repo().join("src")));
    assert!(graph.len() >= 100, "too few files found: {}", graph.len());
    if let Some(cycle) = find_cycle(&graph) {
        panic!("{}", describe(&graph, &cycle));
    }
}

/// A file longer than this (not counting its tests) is split by what its
/// parts do (docs/architecture.md).
const MAX_LINES: usize = 600;

#[test]
fn no_file_is_over_600_lines_of_code_before_its_tests() {
    let long: Vec<String> = sources(&repo().join("src"))
        .iter()
        .filter_map(|f| {
            let code = f
                .text
                .lines()
                .take_while(|l| !l.starts_with("#[cfg(test)]"))
                .count();
            (code > MAX_LINES).then(|| format!("{}: {code} lines", f.path))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines before their tests:\n  {}",
        long.join("\n  ")
    );
}

/// The module graph of the files, one node per file (`exec/keys/mod.rs`).
fn file_graph(files: &[Source]) -> Graph {
    // `main.rs` is the binary's own crate: it names the library as `dqgate`.
    let files: Vec<&Source> = files.iter().filter(|f| f.path != "main.rs").collect();
    let by_module: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| (module_path(&f.path), f.path.clone()))
        .collect();
    let parsed: Vec<Parsed> = files.iter().map(|f| Parsed::of(f)).collect();
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for p in &parsed {
        for (name, target) in &p.reexports {
            reexports.insert((p.module.clone(), name.clone()), target.clone());
        }
    }
    let resolver = Resolver {
        by_module: &by_module,
        reexports: &reexports,
    };
    let mut graph: Graph = files
        .iter()
        .map(|f| (f.path.clone(), BTreeMap::new()))
        .collect();
    for p in &parsed {
        for (line, path) in &p.references {
            let Some(to) = resolver.file_of(path, 0) else {
                continue;
            };
            if *to != p.path {
                graph
                    .get_mut(&p.path)
                    .expect("every file is a node")
                    .entry(to.clone())
                    .or_insert_with(|| format!("{}:{line}", p.path));
            }
        }
    }
    graph
}

/// What one file declares and names.
struct Parsed {
    path: String,
    module: Vec<String>,
    /// Names this file re-exports (`pub use`), with the absolute path they
    /// stand for.
    reexports: Vec<(String, Vec<String>)>,
    /// Absolute paths this file names (outside its `pub use` lines), with
    /// their line.
    references: Vec<(usize, Vec<String>)>,
}

impl Parsed {
    fn of(f: &Source) -> Parsed {
        let module = module_path(&f.path);
        let code = without_test_items(&blank(&f.text));
        let children = children(&code);
        let absolute = |segs: &[String]| absolute(&module, &children, segs);
        let mut reexports = Vec::new();
        let mut references = Vec::new();
        let b = code.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if let Some(end) = pub_use_at(&code, i) {
                let (paths, _) = paths_at(&code, skip_ws(b, end));
                for (path, alias) in paths {
                    if let Some(target) = absolute(&path) {
                        let name =
                            alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
                        reexports.push((name, target));
                    }
                }
                i = code[i..].find(';').map_or(b.len(), |p| i + p + 1);
                continue;
            }
            let starts = is_ident(b[i]) && (i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':'));
            if !starts {
                i += 1;
                continue;
            }
            let (paths, end) = paths_at(&code, i);
            let line = code[..i].matches('\n').count() + 1;
            for (path, _) in paths {
                if path.len() > 1 {
                    if let Some(abs) = absolute(&path) {
                        references.push((line, abs));
                    }
                }
            }
            i = end.max(i + 1);
        }
        Parsed {
            path: f.path.clone(),
            module,
            reexports,
            references,
        }
    }
}

struct Resolver<'a> {
    by_module: &'a BTreeMap<Vec<String>, String>,
    reexports: &'a BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Resolver<'_> {
    /// The file that defines what `path` names: the longest prefix that is
    /// a module, followed through that module's re-exports.
    fn file_of(&self, path: &[String], depth: usize) -> Option<&String> {
        for n in (0..=path.len()).rev() {
            let Some(file) = self.by_module.get(&path[..n]) else {
                continue;
            };
            if let Some(next) = path.get(n) {
                let key = (path[..n].to_vec(), next.clone());
                if let Some(target) = self.reexports.get(&key).filter(|_| depth < 16) {
                    let mut full = target.clone();
                    full.extend_from_slice(&path[n + 1..]);
                    return self.file_of(&full, depth + 1);
                }
            }
            // The crate root only re-exports: a name it does not re-export
            // is not in this crate's files.
            return (n > 0).then_some(file);
        }
        None
    }
}

/// The modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn children(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|line| {
            let mut rest = line.trim();
            if let Some(r) = rest.strip_prefix("pub") {
                rest = r.trim_start();
                if rest.starts_with('(') {
                    rest = rest[rest.find(')')? + 1..].trim_start();
                }
            }
            let name = rest.strip_prefix("mod ")?.trim().strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// A path as the crate root sees it, or `None` when it does not start in
/// this crate (`std::`, a local name, a dependency).
fn absolute(
    module: &[String],
    children: &BTreeSet<String>,
    segs: &[String],
) -> Option<Vec<String>> {
    let first = segs.first()?;
    let mut out: Vec<String>;
    let rest: &[String];
    if first == "crate" {
        out = Vec::new();
        rest = &segs[1..];
    } else if first == "super" {
        let ups = segs.iter().take_while(|s| *s == "super").count();
        out = module[..module.len().checked_sub(ups)?].to_vec();
        rest = &segs[ups..];
    } else if first == "self" {
        out = module.to_vec();
        rest = &segs[1..];
    } else if children.contains(first) {
        out = module.to_vec();
        rest = segs;
    } else {
        return None;
    }
    out.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(out)
}

/// Where the path of a `pub use` (or `pub(...) use`) that starts at `i`
/// begins; `None` when none starts there.
fn pub_use_at(code: &str, i: usize) -> Option<usize> {
    let b = code.as_bytes();
    if i > 0 && is_ident(b[i - 1]) {
        return None;
    }
    let rest = code[i..].strip_prefix("pub")?;
    let mut j = i + 3;
    if rest.trim_start().starts_with('(') {
        j = i + 3 + rest.find(')')? + 1;
    }
    let after = skip_ws(b, j);
    (code[after..].starts_with("use") && b.get(after + 3).is_some_and(u8::is_ascii_whitespace))
        .then_some(after + 3)
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A path as written, and its `as` alias.
type Written = (Vec<String>, Option<String>);

/// The paths written at `i` (`a::b::c`, or a group `a::{b, c::{d, e}}`
/// expanded), each with its `as` alias; and where they end.
fn paths_at(code: &str, i: usize) -> (Vec<Written>, usize) {
    let b = code.as_bytes();
    let mut segs: Vec<String> = Vec::new();
    let mut j = i;
    loop {
        j = skip_ws(b, j);
        if b.get(j) == Some(&b'{') {
            let mut out = Vec::new();
            j += 1;
            loop {
                j = skip_ws(b, j);
                match b.get(j) {
                    None => return (out, j),
                    Some(b'}') => return (out, j + 1),
                    Some(b',') => j += 1,
                    Some(b'*') => j += 1,
                    Some(_) => {
                        let (inner, end) = paths_at(code, j);
                        for (path, alias) in inner {
                            let mut full = segs.clone();
                            full.extend(path);
                            out.push((full, alias));
                        }
                        j = end.max(j + 1);
                    }
                }
            }
        }
        let start = j;
        while j < b.len() && is_ident(b[j]) {
            j += 1;
        }
        if j == start {
            break;
        }
        segs.push(code[start..j].to_string());
        let k = skip_ws(b, j);
        if code[k..].starts_with("::") {
            j = k + 2;
            continue;
        }
        // `a::b as c`
        if code[k..].starts_with("as") && b.get(k + 2).is_some_and(u8::is_ascii_whitespace) {
            let s = skip_ws(b, k + 2);
            let mut e = s;
            while e < b.len() && is_ident(b[e]) {
                e += 1;
            }
            return (vec![(segs, Some(code[s..e].to_string()))], e);
        }
        break;
    }
    (vec![(segs, None)], j)
}

/// The failure message: the cycle and where each of its edges is made.
fn describe(graph: &Graph, cycle: &[String]) -> String {
    let mut s = format!("files of src/ form a cycle: {}\n", cycle.join(" -> "));
    for pair in cycle.windows(2) {
        let at = &graph[&pair[0]][&pair[1]];
        s.push_str(&format!("  {} -> {} at {at}\n", pair[0], pair[1]));
    }
    s.push_str(
        "move what both sides need into a file below them (a `mod.rs` that only \
         declares and re-exports its children closes no cycle)",
    );
    s
}

// The checker itself.

fn src(path: &str, text: &str) -> Source {
    Source {
        path: path.to_string(),
        text: text.to_string(),
    }
}

fn edges(graph: &Graph) -> Vec<String> {
    graph
        .iter()
        .flat_map(|(f, t)| t.keys().map(move |t| format!("{f} -> {t}")))
        .collect()
}

#[test]
fn checker_finds_a_parent_and_child_cycle() {
    let files = [
        src("lib.rs", "pub mod exec;\n"),
        src(
            "exec/mod.rs",
            "mod keys;\npub struct Obs;\nfn f() { keys::run(); }\n",
        ),
        src("exec/keys.rs", "use super::Obs;\npub fn run() {}\n"),
    ];
    let graph = file_graph(&files);
    assert_eq!(
        edges(&graph),
        ["exec/keys.rs -> exec/mod.rs", "exec/mod.rs -> exec/keys.rs"]
    );
    let cycle = find_cycle(&graph).expect("a cycle");
    assert_eq!(cycle, ["exec/keys.rs", "exec/mod.rs", "exec/keys.rs"]);
    assert!(describe(&graph, &cycle).contains("exec/keys.rs -> exec/mod.rs at exec/keys.rs:1"));
}

#[test]
fn checker_sees_through_re_exports_and_groups() {
    let files = [
        src("lib.rs", "pub mod exec;\npub mod audit;\n"),
        // A folder: it declares and re-exports, and names nothing itself.
        src(
            "exec/mod.rs",
            "mod keys;\nmod obs;\npub use obs::Obs;\npub(crate) use keys::{run as go, self};\n",
        ),
        src("exec/obs.rs", "pub struct Obs;\n"),
        src("exec/keys.rs", "use crate::exec::Obs;\npub fn run() {}\n"),
        src(
            "audit.rs",
            "use crate::{exec::{go, Obs}, value};\nfn f() { std::mem::drop(1); }\n",
        ),
    ];
    let graph = file_graph(&files);
    assert_eq!(
        edges(&graph),
        [
            "audit.rs -> exec/keys.rs",
            "audit.rs -> exec/obs.rs",
            "exec/keys.rs -> exec/obs.rs"
        ]
    );
    assert_eq!(find_cycle(&graph), None);
}

#[test]
fn checker_skips_tests_and_comments() {
    let files = [
        src("lib.rs", "pub mod a;\npub mod b;\n"),
        src("b.rs", "pub fn f() {}\nfn g() { crate::a::h() }\n"),
        src(
            "a.rs",
            "//! [`crate::b::f`]\npub fn h() {}\n#[cfg(test)]\nmod tests {\n    use crate::b::f;\n}\n",
        ),
    ];
    let graph = file_graph(&files);
    assert_eq!(edges(&graph), ["b.rs -> a.rs"]);
}
