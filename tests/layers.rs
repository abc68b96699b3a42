//! The crate's layering, checked from its source: no import cycle between any two files of
//! `src/`, and no import from a lower layer into a higher one (ARCHITECTURE.md, "Layers").
//!
//! Imports are read as text: every `crate::`, `super::` and `self::` path in a file (inside
//! `use` trees and inline), resolved to the file that defines the module it names. Unit-test
//! modules (`#[cfg(test)]`) are left out: a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's layers, lowest first. A file may import its own layer (acyclically) and those
/// below it; `lib.rs` sits above everything.
const LAYERS: &[&[&str]] = &[
    &["base"],
    &["object", "patch", "tlog"],
    &["model"],
    &["manifest", "fs"],
    &["repo", "ops"],
    &["tools"],
    &["server"],
];

fn layer_of(module: &[String]) -> usize {
    let top = module.first().map(String::as_str).unwrap_or("");
    LAYERS.iter().position(|l| l.contains(&top)).unwrap_or(LAYERS.len())
}

/// Every `.rs` file under `dir`, without recursion on the tree's depth (an explicit stack).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let (mut out, mut stack) = (Vec::new(), vec![dir.to_path_buf()]);
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module path a file defines, relative to its crate root (`src/a/b.rs` -> `[a, b]`,
/// `src/a/mod.rs` -> `[a]`, `src/lib.rs` -> `[]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The source without unit-test modules and comments.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            // Skip the item that follows: up to its closing brace at the same indentation.
            let indent = line.len() - t.len();
            for l in lines.by_ref() {
                if l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}') {
                    break;
                }
            }
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("pub ").or_else(|| l.strip_prefix("pub(crate) ")).unwrap_or(l);
            rest.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')).map(|m| m.trim().to_string())
        })
        .collect()
}

/// Every path the code names from `crate::`, `super::` or `self::` (or from a child module it
/// declares, as `self::`), with `use` trees expanded (`use crate::a::{b, c::D}` gives
/// `crate::a::b` and `crate::a::c::D`).
fn paths_in(code: &str) -> Vec<String> {
    let mut code = code.to_string();
    for child in children(&code) {
        code = prefix_child(&code, &child);
    }
    let code = code.as_str();
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let starts = [&b"crate::"[..], b"super::", b"self::"].iter().any(|p| rest.starts_with(p));
        let boundary =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        if !(starts && boundary) {
            i += 1;
            continue;
        }
        // A path, then perhaps a `{...}` group (matched by depth counting, not recursion).
        let mut j = i;
        while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_' || bytes[j] == b':') {
            j += 1;
        }
        let head = code[i..j].trim_end_matches(':').to_string();
        if j < bytes.len() && bytes[j] == b'{' {
            let (mut depth, mut k) = (0usize, j);
            while k < bytes.len() {
                match bytes[k] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                k += 1;
            }
            for item in expand(&head, &code[j..=k.min(bytes.len() - 1)]) {
                out.push(item);
            }
            i = k + 1;
        } else {
            out.push(head);
            i = j;
        }
    }
    out
}

/// `child::x` (not itself after `::` or a name) written as `self::child::x`.
fn prefix_child(code: &str, child: &str) -> String {
    let needle = format!("{child}::");
    let mut out = String::with_capacity(code.len());
    let mut last = 0;
    for (at, _) in code.match_indices(&needle) {
        let before = code[..at].bytes().last();
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
            continue;
        }
        out.push_str(&code[last..at]);
        out.push_str("self::");
        last = at;
    }
    out.push_str(&code[last..]);
    out
}

/// Expands one `{...}` use group under `head` into whole paths, nested groups included.
fn expand(head: &str, group: &str) -> Vec<String> {
    let mut out = Vec::new();
    // (prefix, text of a group without its braces)
    let mut stack = vec![(head.to_string(), group[1..group.len().saturating_sub(1)].to_string())];
    while let Some((prefix, body)) = stack.pop() {
        let (mut depth, mut start) = (0usize, 0usize);
        let mut items = Vec::new();
        for (k, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    items.push(body[start..k].trim().to_string());
                    start = k + 1;
                }
                _ => {}
            }
        }
        items.push(body[start..].trim().to_string());
        for item in items.into_iter().filter(|s| !s.is_empty()) {
            if let Some(open) = item.find('{') {
                let sub = item[..open].trim_end_matches(':').trim();
                let inner = item[open + 1..item.rfind('}').unwrap_or(item.len())].to_string();
                stack.push((format!("{prefix}::{sub}"), inner));
            } else {
                let name = item.split(" as ").next().unwrap_or("").trim();
                match name {
                    "self" => out.push(prefix.clone()),
                    "*" => out.push(prefix.clone()),
                    _ => out.push(format!("{prefix}::{name}")),
                }
            }
        }
    }
    out
}

/// The file that defines the longest module prefix of `path` (`crate::a::b::C` -> `src/a/b.rs`
/// if it exists, else `src/a/mod.rs` or `src/a.rs`, else the crate root), with that module's
/// path and the segments left over (`C`).
fn resolve(src: &Path, root: &Path, current: &[String], path: &str) -> Option<(PathBuf, Vec<String>, Vec<String>)> {
    let mut segs: Vec<&str> = path.split("::").collect();
    let mut module: Vec<String> = match segs.first().copied() {
        Some("crate") => Vec::new(),
        Some("self") => current.to_vec(),
        Some("super") => {
            let mut m = current.to_vec();
            m.pop();
            while segs.get(1) == Some(&"super") {
                segs.remove(0);
                m.pop();
            }
            m
        }
        _ => return None,
    };
    segs.remove(0);
    let base = module.clone();
    let mut best = (root.to_path_buf(), Vec::new(), segs.iter().map(|s| s.to_string()).collect());
    for n in 0..=segs.len() {
        module.truncate(base.len());
        module.extend(segs[..n].iter().map(|s| s.to_string()));
        let dir: PathBuf = module.iter().collect();
        for cand in [src.join(&dir).with_extension("rs"), src.join(&dir).join("mod.rs")] {
            if !module.is_empty() && cand.is_file() {
                best = (cand, module.clone(), segs[n..].iter().map(|s| s.to_string()).collect());
            }
        }
        if module.is_empty() {
            best = (root.to_path_buf(), Vec::new(), segs.iter().map(|s| s.to_string()).collect());
        }
    }
    Some(best)
}

/// What a file re-exports (`pub use a::b::C;`): name -> the path it stands for.
fn reexports(code: &str) -> BTreeMap<String, String> {
    let mut code = code.to_string();
    for child in children(&code) {
        code = prefix_child(&code, &child);
    }
    let mut out = BTreeMap::new();
    for stmt in code.split(';') {
        let s = stmt.trim();
        let Some(rest) = s.strip_prefix("pub use ").or_else(|| s.strip_prefix("pub(crate) use ")) else {
            continue;
        };
        for p in paths_in(rest) {
            if let Some(name) = p.rsplit("::").next() {
                out.insert(name.to_string(), p.clone());
            }
        }
    }
    out
}

/// The import graph of one crate: file -> files it imports, following re-exports through to
/// the file that defines the name (so `mod.rs` facades do not make cycles of their own).
fn graph(src: &Path, root: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let codes: BTreeMap<PathBuf, String> =
        files.iter().map(|f| (f.clone(), code_of(&std::fs::read_to_string(f).expect("read")))).collect();
    let exports: BTreeMap<PathBuf, BTreeMap<String, String>> =
        codes.iter().map(|(f, c)| (f.clone(), reexports(c))).collect();
    let mut g = BTreeMap::new();
    for (f, code) in &codes {
        let module = module_of(src, f);
        let mut targets = BTreeSet::new();
        for p in paths_in(code) {
            let Some(mut hit) = resolve(src, root, &module, &p) else { continue };
            // A name re-exported by the file it resolved to: go on to where it is defined.
            for _ in 0..8 {
                let next = hit.2.first().and_then(|n| exports.get(&hit.0).and_then(|e| e.get(n)));
                match next.and_then(|p| resolve(src, root, &hit.1, p)) {
                    Some(further) if further.0 != hit.0 => hit = further,
                    _ => break,
                }
            }
            if hit.0 != *f && hit.0 != root {
                targets.insert(hit.0);
            }
        }
        g.insert(f.clone(), targets);
    }
    g
}

/// Strongly connected components with more than one file (Tarjan's algorithm, iterative).
fn cycles(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    let nodes: Vec<&PathBuf> = g.keys().collect();
    let idx: BTreeMap<&PathBuf, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> =
        nodes.iter().map(|n| g[*n].iter().filter_map(|t| idx.get(t).copied()).collect()).collect();
    let n = nodes.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut next, mut stack, mut out) = (0, Vec::new(), Vec::new());
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        let mut work = vec![(s, 0usize)];
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = adj[v].get(*edge) {
                *edge += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}

struct Crate {
    src: PathBuf,
    graph: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

/// The library (everything under `src/` but the binary's files) and the binary (`main.rs`
/// and `cli/`), each with its own `crate::`.
fn crates() -> (Crate, Crate) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = rust_files(&src);
    let is_bin = |f: &PathBuf| f.ends_with("main.rs") || f.starts_with(src.join("cli"));
    let (bin, lib): (Vec<PathBuf>, Vec<PathBuf>) = all.into_iter().partition(is_bin);
    let lib_graph = graph(&src, &src.join("lib.rs"), &lib);
    let bin_graph = graph(&src, &src.join("main.rs"), &bin);
    (Crate { src: src.clone(), graph: lib_graph }, Crate { src, graph: bin_graph })
}

fn show(files: &[PathBuf], src: &Path) -> String {
    files.iter().map(|f| f.strip_prefix(src).unwrap_or(f).display().to_string()).collect::<Vec<_>>().join(", ")
}

#[test]
fn no_import_cycle_between_files() {
    let (lib, bin) = crates();
    for c in [&lib, &bin] {
        let found = cycles(&c.graph);
        let text: Vec<String> = found
            .iter()
            .map(|comp| {
                let edges: Vec<String> = comp
                    .iter()
                    .flat_map(|f| {
                        c.graph[f]
                            .iter()
                            .filter(|t| comp.contains(t))
                            .map(move |t| show(&[f.clone(), t.clone()], &c.src))
                    })
                    .map(|e| e.replace(", ", " -> "))
                    .collect();
                format!("{} ({})", show(comp, &c.src), edges.join("; "))
            })
            .collect();
        assert!(text.is_empty(), "import cycles (each line is files that reach one another):\n{}", text.join("\n"));
    }
}

#[test]
fn no_import_from_a_lower_layer_into_a_higher_one() {
    let (lib, _) = crates();
    let mut upward = Vec::new();
    for (file, targets) in &lib.graph {
        let from = module_of(&lib.src, file);
        if from.is_empty() {
            continue; // lib.rs: the curated exports
        }
        for t in targets {
            let to = module_of(&lib.src, t);
            if layer_of(&to) > layer_of(&from) {
                upward.push(format!(
                    "{} -> {}",
                    show(std::slice::from_ref(file), &lib.src),
                    show(std::slice::from_ref(t), &lib.src)
                ));
            }
        }
    }
    assert!(upward.is_empty(), "imports that run up the layers ({LAYERS:?}):\n{}", upward.join("\n"));
}

/// `Repo`'s methods are defined in `repo.rs` and `ops/` only: a method added by a higher layer
/// could be called from below it without any import showing it (ARCHITECTURE.md, "Layers").
#[test]
fn only_repo_and_ops_add_methods_to_repo() {
    let (lib, _) = crates();
    let mut outside = Vec::new();
    for file in lib.graph.keys() {
        let module = module_of(&lib.src, file);
        if matches!(module.first().map(String::as_str), Some("repo" | "ops")) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).expect("read"));
        if code.lines().any(|l| l.trim_start().starts_with("impl Repo") || l.contains("for Repo {")) {
            outside.push(show(std::slice::from_ref(file), &lib.src));
        }
    }
    assert!(outside.is_empty(), "files outside repo.rs and ops/ with `impl Repo`: {}", outside.join(", "));
}

#[test]
fn the_checker_sees_a_cycle_and_expands_use_trees() {
    // The checker itself: a use tree expands to whole paths, and a two-file ring is found.
    let mut paths = paths_in("mod k;\nuse crate::a::{b, c::{D, e::F}, self};\nlet x = super::g::h(k::m());");
    paths.sort();
    assert_eq!(paths, ["crate::a", "crate::a::b", "crate::a::c::D", "crate::a::c::e::F", "self::k::m", "super::g::h"]);
    let (a, b, c) = (PathBuf::from("a.rs"), PathBuf::from("b.rs"), PathBuf::from("c.rs"));
    let mut g = BTreeMap::new();
    g.insert(a.clone(), BTreeSet::from([b.clone()]));
    g.insert(b.clone(), BTreeSet::from([a.clone(), c.clone()]));
    g.insert(c.clone(), BTreeSet::new());
    assert_eq!(cycles(&g), vec![vec![a, b]]);
}
