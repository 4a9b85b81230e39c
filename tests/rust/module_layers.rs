//! A crate's modules import only downwards: the check behind `crates/kage-pass/tests/` and
//! `crates/kage-rt/tests/module_layers.rs` (each includes this file with its own [`Layers`]).
//! It reads the crate's `src/`, takes every `crate::x` reference of each file (comments and
//! test code left out; `crate::{a, b::c}` counts `a` and `b`) as an edge from the file's
//! top-level module to `x`, and checks that the graph has no circle, that the low-level
//! modules import nothing above them, and that a tool (a direct child of the tools'
//! directory) imports nothing above it and no other tool.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's layering rules.
pub struct Layers<'a> {
    /// The crate's `src/`.
    pub src: PathBuf,
    /// Top-level modules that must import none of `high`.
    pub low: &'a [&'a str],
    /// What the low level and the tools must never import (the tools' directory included:
    /// a tool may use its own module only).
    pub high: &'a [&'a str],
    /// The tools' directory (a top-level module): each direct child is a tool.
    pub tools: &'a str,
    /// Tools that must be found (proves the walk saw them).
    pub expected_tools: &'a [&'a str],
}

struct File {
    /// `src/`-relative path.
    path: String,
    /// The top-level module (the tools' directory for everything under it).
    top: String,
    /// The tool, for a file under the tools' directory other than its `mod.rs`.
    tool: Option<String>,
    code: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code without `//` comments (doc comments included) and `/* */` comments.
fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if let Some(quote) = ["'\"'", "'\\\"'"].iter().find(|q| rest.starts_with(**q)) {
            // The character literal of a double quote is no string's start.
            out.push_str(quote);
            rest = &rest[quote.len()..];
        } else if rest.starts_with('"') {
            // A string literal, kept whole (it may hold "//").
            let end = rest[1..]
                .char_indices()
                .scan(false, |escaped, (i, c)| {
                    let done = !*escaped && c == '"';
                    *escaped = !*escaped && c == '\\';
                    Some((i, done))
                })
                .find(|&(_, done)| done)
                .map_or(rest.len(), |(i, _)| i + 2);
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// `code` without test-only items: a `#[cfg(test)] mod x;` line, and everything from a
/// `#[cfg(test)] mod x {` to the end (where test modules live).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut lines = code.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            match lines.peek().map(|l| l.trim()) {
                Some(next) if next.starts_with("mod ") && next.ends_with(';') => {
                    lines.next();
                    continue;
                }
                Some(next) if next.starts_with("mod ") => break,
                _ => {}
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn files(layers: &Layers) -> Vec<File> {
    let src = &layers.src;
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.file_stem().is_some_and(|s| s != "tests"))
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap();
            let parts: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            let top = parts[0].clone();
            let tool = (top == layers.tools && parts.len() >= 2 && parts[1] != "mod")
                .then(|| parts[1].clone());
            let code = std::fs::read_to_string(&p).unwrap();
            File {
                path: rel.to_string_lossy().into_owned(),
                top,
                tool,
                code: strip_comments(&without_tests(&code)),
            }
        })
        .collect()
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every path `crate::...` in `code`, as its segments after `crate` (a group
/// `crate::{a, b::{c, d}}` gives `a` and `b::c`, `b::d`).
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    fn expand(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        // `s` starts right after a `::`.
        let s = s.trim_start();
        if let Some(group) = s.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        expand(&group[start..i], prefix, out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&group[start..i], prefix, out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let id = ident(s);
        if id.is_empty() {
            if !prefix.is_empty() {
                out.push(prefix.to_vec());
            }
            return;
        }
        let mut path = prefix.to_vec();
        path.push(id.to_string());
        match s[id.len()..].trim_start().strip_prefix("::") {
            Some(rest) => expand(rest, &path, out),
            None => out.push(path),
        }
    }
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `kage_abi::...` is not `crate::`, nor is `mycrate::`
        }
        expand(&code[i + "crate::".len()..], &[], &mut out);
    }
    out
}

/// Checks `layers`; returns the module graph (each top-level module and what it imports).
pub fn check(layers: &Layers) -> BTreeMap<String, BTreeSet<String>> {
    let files = files(layers);
    let tools: BTreeSet<String> = files.iter().filter_map(|f| f.tool.clone()).collect();
    assert!(
        layers.expected_tools.iter().all(|t| tools.contains(*t)),
        "{tools:?}"
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for f in &files {
        let paths = crate_paths(&f.code);
        let deps = graph.entry(f.top.clone()).or_default();
        for p in &paths {
            if p[0] != f.top {
                deps.insert(p[0].clone());
            }
        }
        if layers.low.contains(&f.top.as_str()) {
            for p in paths
                .iter()
                .filter(|p| layers.high.contains(&p[0].as_str()))
            {
                problems.push(format!(
                    "{}: low-level, uses crate::{}",
                    f.path,
                    p.join("::")
                ));
            }
        }
        if let Some(tool) = &f.tool {
            for p in &paths {
                let other_tool = p[0] == layers.tools && p.get(1).is_some_and(|t| t != tool);
                if layers.high.contains(&p[0].as_str()) && (p[0] != layers.tools || other_tool) {
                    problems.push(format!(
                        "{}: tool {tool} uses crate::{}",
                        f.path,
                        p.join("::")
                    ));
                }
            }
            for other in tools.iter().filter(|t| *t != tool) {
                if f.code.contains(&format!("super::{other}")) {
                    problems.push(format!("{}: tool {tool} uses tool {other}", f.path));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every edge points to a module that exists (the parse found real paths).
    for (m, deps) in &graph {
        for d in deps {
            assert!(graph.contains_key(d), "{m} uses crate::{d}, not a module");
        }
    }
    // No circle: a depth-first search finds no edge back to a module on the current path.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(i) = path.iter().position(|p| p == m) {
            panic!("import circle: {} -> {m}", path[i..].join(" -> "));
        }
        path.push(m.to_string());
        for d in &graph[m] {
            visit(d, graph, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
    // What the layers look like, for whoever reads the test's output.
    for (m, deps) in &graph {
        println!(
            "{m} -> {}",
            deps.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    graph
}

/// The parser itself (run by each crate that includes this file).
pub fn check_the_parser() {
    let code = "use crate::{gate, registry::{self, Meta}, tool::Tool};\n\
                let x = crate::tools::working_set::tool(); my_crate::nope;";
    let paths: Vec<String> = crate_paths(code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "gate",
            "registry::self",
            "registry::Meta",
            "tool::Tool",
            "tools::working_set::tool"
        ]
    );
    assert_eq!(
        strip_comments("a // crate::x\n/* crate::y */ \"//\" b"),
        "a \n \"//\" b"
    );
    assert_eq!(
        strip_comments("'\"' // x\n\"a\\\"//\""),
        "'\"' \n\"a\\\"//\""
    );
    assert_eq!(
        without_tests("a\n#[cfg(test)]\nmod t;\nb\n#[cfg(test)]\nmod tests {\nc\n}\n"),
        "a\nb\n"
    );
}
