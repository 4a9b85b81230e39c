//! The pass's first step, at the start of the pipeline: line tables name each function's
//! subprogram without its linkage name, and the pass adds it (the regions of inlined C++
//! functions are named from it), without clang's `-fdebug-info-for-profiling`, which
//! changes the optimiser's inlining.

mod support;

use support::*;

#[test]
fn line_tables_get_the_linkage_names_of_defined_functions() {
    let dir = tempfile::tempdir().unwrap();
    let ll = early_ir(
        "clang++-22",
        &ir_dir().join("../c/inlined/inl.cpp"),
        dir.path(),
    );
    let plain = std::fs::read_to_string(&ll).unwrap();
    let method = |ir: &str| {
        ir.lines()
            .find(|l| l.contains("DISubprogram(name: \"add_all\"") && l.contains("distinct"))
            .unwrap_or_else(|| panic!("no subprogram for add_all"))
            .to_string()
    };
    // Without the pass: no linkage name.
    assert!(
        !method(&plain).contains("linkageName"),
        "{}",
        method(&plain)
    );
    let named = run_plugin_on(&ll, &[], "kage-version-loops");
    assert!(
        method(&named).contains("linkageName: \"_ZN11Accumulator7add_allEPKdi\""),
        "{}",
        method(&named)
    );
    // A C-like name that is its own linkage name gets none.
    let main = named
        .lines()
        .find(|l| l.contains("DISubprogram(name: \"main\""))
        .unwrap();
    assert!(!main.contains("linkageName"), "{main}");
}
