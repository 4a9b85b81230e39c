//! Which loops a build selects: `KAGE_LOOPS=file.c:42,other.c:7` names loops by the source
//! line their statement starts on. Pure Rust, no LLVM.

/// One `file:line` of `KAGE_LOOPS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for LineSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Parses `KAGE_LOOPS`: comma-separated `file:line` entries (spaces around them ignored).
/// A malformed entry is an error that names it.
pub fn parse_specs(value: &str) -> Result<Vec<LineSpec>, String> {
    let mut specs = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if entry.starts_with('@') {
            return Err(format!(
                "'{entry}': selecting the hottest loops of a report is not supported yet; \
                 name loops as file.c:line"
            ));
        }
        let bad = || format!("'{entry}' is not file:line (for example kernel.c:42)");
        let (file, line) = entry.rsplit_once(':').ok_or_else(bad)?;
        let line: u32 = line.trim().parse().map_err(|_| bad())?;
        if file.trim().is_empty() || line == 0 {
            return Err(bad());
        }
        specs.push(LineSpec {
            file: file.trim().to_string(),
            line,
        });
    }
    Ok(specs)
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

    #[test]
    fn specs_parse_and_malformed_ones_are_named() {
        let specs = parse_specs(" a.c:4, dir/b.cpp:120 ,").unwrap();
        assert_eq!(
            specs,
            [
                LineSpec {
                    file: "a.c".into(),
                    line: 4
                },
                LineSpec {
                    file: "dir/b.cpp".into(),
                    line: 120
                }
            ]
        );
        assert_eq!(parse_specs("").unwrap(), []);
        for bad in ["a.c", "a.c:x", ":3", "a.c:0", "a.c:-2"] {
            let e = parse_specs(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        assert!(parse_specs("@kage.x.1.json").unwrap_err().contains("not supported"));
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
