//! Which loops a build selects: `KAGE_LOOPS=file.c:42,other.c:7` names loops by the source
//! line their statement starts on; `KAGE_LOOPS=@kage.prog.123.json` takes the hottest loop
//! nests of an earlier `count` report. Pure Rust, no LLVM.

use serde_json::Value;

/// One loop a build selects by its source line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    pub file: String,
    pub line: u32,
    /// The count report it was taken from, if any (named in errors).
    pub from_report: Option<String>,
}

impl std::fmt::Display for LineSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(report) = &self.from_report {
            write!(f, " (a hot loop of {report})")?;
        }
        Ok(())
    }
}

/// A loop nest is hot when its loops' own accesses are at least this share of the program's.
pub const HOT_SHARE: f64 = 0.05;
/// At most this many hot nests are taken from a report, the hottest first.
pub const MAX_HOT_NESTS: usize = 8;

/// Parses `KAGE_LOOPS`: comma-separated `file:line` entries and `@report.json` entries
/// (spaces around them ignored); `read` reads a report. A malformed entry, or a report that
/// cannot be read or is not a count report, is an error that names it.
pub fn parse_specs(
    value: &str,
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Vec<LineSpec>, String> {
    let mut specs = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if let Some(path) = entry.strip_prefix('@') {
            let text = read(path).map_err(|e| format!("'{path}': {e}"))?;
            let hot = hottest_loops(&text).map_err(|e| format!("'{path}': {e}"))?;
            specs.extend(hot.into_iter().map(|(file, line)| LineSpec {
                file,
                line,
                from_report: Some(path.to_string()),
            }));
            continue;
        }
        let bad =
            || format!("'{entry}' is not file:line (for example kernel.c:42) or @report.json");
        let (file, line) = entry.rsplit_once(':').ok_or_else(bad)?;
        let line: u32 = line.trim().parse().map_err(|_| bad())?;
        if file.trim().is_empty() || line == 0 {
            return Err(bad());
        }
        specs.push(LineSpec {
            file: file.trim().to_string(),
            line,
            from_report: None,
        });
    }
    Ok(specs)
}

/// The hottest loop nests of a `count` report (docs/report-schema.md), as (file, line) of
/// their outermost loops: a loop's *own* accesses are the self loads and stores of its
/// loop and body regions and of the loops nested in them (callees not included: their own
/// loops compete on their own); the loops whose own accesses are at least [`HOT_SHARE`] of
/// the program's are hot, the compiler's copies of one source loop joined; hot loops inside
/// hot loops belong to the outer one's nest; at most [`MAX_HOT_NESTS`], hottest first.
pub fn hottest_loops(report: &str) -> Result<Vec<(String, u32)>, String> {
    let report: Value = serde_json::from_str(report).map_err(|e| format!("not a report ({e})"))?;
    match report["tool"].as_str() {
        Some("count") => {}
        Some(other) => {
            return Err(format!(
                "a {other} report; the hottest loops come from a count report"
            ))
        }
        None => return Err("not a Kage report (no tool)".into()),
    }
    let regions = report["regions"]
        .as_array()
        .ok_or("a report without regions")?;
    let field = |r: &Value, name: &str| r[name].as_u64().unwrap_or(0);
    let own = |r: &Value| field(r, "self_loads") + field(r, "self_stores");
    let kind = |r: &Value| r["kind"].as_str().unwrap_or("").to_string();
    let by_id: std::collections::HashMap<u64, &Value> = (regions.iter())
        .filter_map(|r| Some((r["id"].as_u64()?, r)))
        .collect();
    // The loop each loop or body region belongs to (itself for a loop), through loops and
    // bodies only: a region's accesses count for every loop above it up to a function.
    let mut totals: std::collections::HashMap<(String, u32), u64> = Default::default();
    let mut program = 0u64;
    for r in regions {
        program += own(r);
        let mut at = Some(r);
        while let Some(region) = at {
            let k = kind(region);
            if k != "loop" && k != "loop-body" {
                break;
            }
            if k == "loop" {
                let key = (
                    region["file"].as_str().unwrap_or("").to_string(),
                    region["line"].as_u64().unwrap_or(0) as u32,
                );
                if !key.0.is_empty() && key.1 != 0 {
                    *totals.entry(key).or_default() += own(r);
                }
            }
            at = region["parent"]
                .as_u64()
                .and_then(|p| by_id.get(&p).copied());
        }
    }
    let mut hot: Vec<((String, u32), u64)> = (totals.into_iter())
        .filter(|(_, n)| program > 0 && *n as f64 >= HOT_SHARE * program as f64)
        .collect();
    hot.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(hot
        .into_iter()
        .take(MAX_HOT_NESTS)
        .map(|(key, _)| key)
        .collect())
}

/// Whether the spec's file names `file` (a path as debug information records it): equal,
/// or a suffix of it on a path-component boundary (`kernel.c` and `src/kernel.c` both name
/// `/home/me/src/kernel.c`).
pub fn names_file(spec_file: &str, file: &str) -> bool {
    let spec = spec_file.trim_start_matches("./");
    if spec.is_empty() {
        return false;
    }
    file == spec
        || file
            .strip_suffix(spec)
            .is_some_and(|rest| rest.ends_with('/') && !spec.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_file(path: &str) -> Result<String, String> {
        Err(format!("cannot read {path}"))
    }

    #[test]
    fn specs_parse_and_malformed_ones_are_named() {
        let specs = parse_specs(" a.c:4, dir/b.cpp:120 ,", &no_file).unwrap();
        let spec = |file: &str, line| LineSpec {
            file: file.into(),
            line,
            from_report: None,
        };
        assert_eq!(specs, [spec("a.c", 4), spec("dir/b.cpp", 120)]);
        assert_eq!(parse_specs("", &no_file).unwrap(), []);
        for bad in ["a.c", "a.c:x", ":3", "a.c:0", "a.c:-2"] {
            let e = parse_specs(bad, &no_file).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        let e = parse_specs("@kage.x.1.json", &no_file).unwrap_err();
        assert!(e.contains("cannot read kage.x.1.json"), "{e}");
    }

    /// A count report's region (only what [`hottest_loops`] reads).
    fn region(id: u64, kind: &str, parent: Option<u64>, line: u32, own: u64) -> Value {
        serde_json::json!({"id": id, "kind": kind, "parent": parent, "file": "/s/k.c",
                           "line": line, "self_loads": own, "self_stores": 0})
    }

    #[test]
    fn the_hottest_nests_of_a_count_report() {
        // main (10 own accesses) holds loop 5 (body: 40) with loop 7 inside (body: 500),
        // and loop 20 (body: 30); g, called from loop 7's body, has loop 30 (body: 420).
        // Of 1000 accesses, loops 5 (540 with loop 7's), 7 (500) and 30 (420) are hot, 20
        // (30) is not; 7 lies in 5, which the pass joins into one nest.
        let report = serde_json::json!({"tool": "count", "regions": [
            region(0, "function", None, 1, 10),
            region(1, "loop", Some(0), 5, 0), region(2, "loop-body", Some(1), 5, 40),
            region(3, "loop", Some(2), 7, 0), region(4, "loop-body", Some(3), 7, 500),
            region(5, "loop", Some(0), 20, 0), region(6, "loop-body", Some(5), 20, 30),
            region(7, "function", Some(4), 28, 0),
            region(8, "loop", Some(7), 30, 0), region(9, "loop-body", Some(8), 30, 420),
        ]})
        .to_string();
        let k = |line| ("/s/k.c".to_string(), line);
        assert_eq!(hottest_loops(&report).unwrap(), [k(5), k(7), k(30)]);
        let read = |_: &str| Ok(report.clone());
        let specs = parse_specs("@r.json", &read).unwrap();
        assert_eq!(specs.len(), 3);
        assert_eq!(specs[0].to_string(), "/s/k.c:5 (a hot loop of r.json)");
        let ws = r#"{"tool": "working-set", "regions": []}"#;
        assert!(hottest_loops(ws).unwrap_err().contains("count report"));
        assert!(hottest_loops("{").unwrap_err().contains("not a report"));
    }

    #[test]
    fn files_match_on_path_components() {
        assert!(names_file("k.c", "/src/k.c"));
        assert!(names_file("src/k.c", "/home/src/k.c"));
        assert!(names_file("./k.c", "/src/k.c"));
        assert!(names_file("/src/k.c", "/src/k.c"));
        assert!(!names_file("k.c", "/src/kk.c"));
        assert!(!names_file("/k.c", "/src/k.c"));
        assert!(!names_file("", "/src/k.c"));
    }
}
