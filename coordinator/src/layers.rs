//! The coordinator's layers, checked against its source: every module
//! imports only from its own layer or the ones below it, and no modules
//! import each other in a circle — neither the top-level ones nor the files
//! of one folder (`store/jobs` and `store/campaigns`). The order is the one
//! `docs/architecture.md` describes; this test is where it is enforced.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers from the bottom up; a module may import from its own layer and
/// those below. `pg`, `tls` and `guard` are infrastructure and import nothing of the crate.
const LAYERS: &[&[&str]] = &[
    &["pg", "tls", "guard"],
    &["domain"],
    &["analysis"],
    &["store"],
    &["report"],
    &[
        "ingest",
        "scheduler",
        "findings",
        "watch",
        "cluster",
        "seen",
        "launch",
        "retention",
    ],
    &["grpc", "web", "metrics"],
    &["server"],
    &["cli"],
];

/// Items at the crate root and the module they belong to: the macro
/// `latest_result_columns!` is exported from `domain::latest`.
const ROOT_ITEMS: &[(&str, &str)] = &[("latest_result_columns", "domain")];

/// One import: `from` (a node: a top-level module or one of its children)
/// uses `to`, in `file`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    from: String,
    to: String,
    file: String,
}

/// `source` without comments, string and character literals (their text is
/// no import), keeping everything else.
fn code_of(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && (i == 0 || !is_ident(b[i - 1])) => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A character literal ('x', '\n', '"'), not a lifetime ('a).
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 3,
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every path that starts at `crate` or `super` in `code` (use trees
/// expanded: `use crate::{a, b::c}` is `crate::a` and `crate::b::c`), as
/// segments.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i..].starts_with(b"crate::") || b[i..].starts_with(b"super::"))
            && (i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':'));
        if starts {
            i = tree(code, i, Vec::new(), &mut paths);
        } else {
            i += 1;
        }
    }
    paths
}

/// Reads a path or use tree at `i` under `prefix` into `out`; returns where it ends.
fn tree(code: &str, mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = code.as_bytes();
    let skip_space = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_space(i);
        if b.get(i) == Some(&b'{') {
            i += 1;
            loop {
                i = tree(code, i, prefix.clone(), out);
                i = skip_space(i);
                match b.get(i) {
                    Some(b',') => i += 1,
                    Some(b'}') => return i + 1,
                    _ => return i,
                }
            }
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        if i == start {
            break;
        }
        prefix.push(code[start..i].to_string());
        let next = skip_space(i);
        if b[next..].starts_with(b"::") {
            i = next + 2;
        } else {
            break;
        }
    }
    if !prefix.is_empty() {
        out.push(prefix);
    }
    i
}

/// The module path of `file` under `src` (`store/jobs/claims.rs` → `store::jobs::claims`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The node a module path belongs to: its top-level module, or the child of
/// it that is a module of its own (an item of the top-level module is the
/// top-level module).
fn node_of(src: &Path, path: &[String]) -> Option<String> {
    let top = path.first()?;
    if let Some((_, owner)) = ROOT_ITEMS.iter().find(|(item, _)| item == top) {
        return Some(owner.to_string());
    }
    let child = path.get(1).filter(|c| {
        let at = src.join(top).join(c.as_str());
        at.with_extension("rs").is_file() || at.is_dir()
    });
    Some(match child {
        Some(c) => format!("{top}/{c}"),
        None => top.clone(),
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every import between nodes of the crate under `src`.
fn imports(src: &Path) -> Vec<Import> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = BTreeSet::new();
    for file in files {
        let module = module_of(src, &file);
        if matches!(module.as_slice(), [m] if m == "lib" || m == "main") {
            continue;
        }
        let from = node_of(src, &module).expect("a module");
        let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for path in paths_in(&code_of(&source)) {
            let target: Vec<String> = if path[0] == "crate" {
                path[1..].to_vec()
            } else {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let base = &module[..module.len().saturating_sub(supers)];
                base.iter().chain(&path[supers..]).cloned().collect()
            };
            let Some(to) = node_of(src, &target) else { continue };
            if to != from {
                let file = file.strip_prefix(src).unwrap_or(&file).display().to_string();
                found.insert(Import {
                    from: from.clone(),
                    to,
                    file,
                });
            }
        }
    }
    found.into_iter().collect()
}

fn top(node: &str) -> &str {
    node.split('/').next().unwrap_or(node)
}

/// The imports that point to a higher layer, and the top-level modules no layer names.
fn upward(imports: &[Import], modules: &BTreeSet<String>) -> Vec<String> {
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut wrong: Vec<String> = modules
        .iter()
        .filter(|m| layer(m).is_none())
        .map(|m| format!("{m} is in no layer: add it to LAYERS"))
        .collect();
    for i in imports {
        if let (Some(from), Some(to)) = (layer(top(&i.from)), layer(top(&i.to)))
            && to > from
        {
            wrong.push(format!("{} imports {} upward ({})", i.from, i.to, i.file));
        }
    }
    wrong
}

/// The circles among `edges` (strongly connected components of two or more nodes).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm; the graphs are a few dozen nodes.
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for next in w.edges.get(v).into_iter().flatten() {
            let next = next.as_str();
            if !w.index.contains_key(next) {
                visit(w, next);
                let low = w.low[v].min(w.low[next]);
                w.low.insert(v, low);
            } else if w.stack.contains(&next) {
                let low = w.low[v].min(w.index[next]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut circle = Vec::new();
            while let Some(u) = w.stack.pop() {
                circle.push(u.to_string());
                if u == v {
                    break;
                }
            }
            if circle.len() > 1 {
                circle.sort();
                w.found.push(circle);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found
}

/// Circles between top-level modules, and between the children of one
/// top-level module (a module and its own children are one unit: the parent
/// declares them, they use what it shares).
fn all_circles(imports: &[Import]) -> Vec<Vec<String>> {
    let mut tops: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut children: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in imports {
        let (from, to) = (top(&i.from), top(&i.to));
        if from != to {
            tops.entry(from.to_string()).or_default().insert(to.to_string());
        } else if i.from.contains('/') && i.to.contains('/') {
            children.entry(i.from.clone()).or_default().insert(i.to.clone());
        }
    }
    let mut found = circles(&tops);
    found.extend(circles(&children));
    found
}

#[test]
fn no_module_imports_upward_or_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let imports = imports(&src);
    assert!(
        imports.len() > 100,
        "the source was read: {} imports found",
        imports.len()
    );
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("reading src")
        .map(|e| e.expect("a directory entry").path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_string();
            (p.is_dir() || p.extension().is_some_and(|e| e == "rs")).then_some(name)
        })
        .filter(|m| m != "lib" && m != "main" && m != "layers")
        .collect();
    let wrong = upward(&imports, &modules);
    assert!(
        wrong.is_empty(),
        "imports against the layer order:\n{}",
        wrong.join("\n")
    );
    let found = all_circles(&imports);
    assert!(
        found.is_empty(),
        "modules that import each other in a circle: {found:?}"
    );
}

#[test]
fn use_trees_paths_and_super_are_read_and_literals_are_not() {
    let code = code_of(
        r##"use crate::{store::{self, jobs::Job}, domain};
        // use crate::web;
        let s = "crate::grpc::x"; let r = r#"crate::cli"#; let c = '"'; let l: &'a str;
        super::super::scheduler::run(); crate::report::matrix::View { };"##,
    );
    let paths: Vec<String> = paths_in(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "crate::store::self",
            "crate::store::jobs::Job",
            "crate::domain",
            "super::super::scheduler::run",
            "crate::report::matrix::View"
        ]
    );
}

#[test]
fn an_upward_import_and_a_circle_are_found() {
    let import = |from: &str, to: &str| Import {
        from: from.into(),
        to: to.into(),
        file: format!("{from}.rs"),
    };
    let modules: BTreeSet<String> = ["store", "analysis", "web", "nowhere"].map(String::from).into();
    let wrong = upward(
        &[import("store/jobs", "web/compare"), import("web", "store/jobs")],
        &modules,
    );
    assert_eq!(
        wrong,
        [
            "nowhere is in no layer: add it to LAYERS",
            "store/jobs imports web/compare upward (store/jobs.rs)"
        ]
    );
    let found = all_circles(&[
        import("store/jobs", "store/campaigns"),
        import("store/campaigns", "store/jobs"),
        import("store", "store/jobs"),
        import("store/jobs", "store"),
        import("analysis", "store"),
        import("store/points", "analysis/marks"),
    ]);
    assert_eq!(
        found,
        [
            vec!["analysis".to_string(), "store".to_string()],
            vec!["store/campaigns".to_string(), "store/jobs".to_string()]
        ]
    );
}
