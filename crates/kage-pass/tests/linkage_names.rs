//! The pass's first step, at the start of the pipeline: line tables name each function's
//! subprogram without its linkage name, and the pass adds it (the regions of inlined C++
//! functions are named from it), without clang's `-fdebug-info-for-profiling`, which
//! changes the optimiser's inlining.

mod support;

use std::process::Command;

use support::*;

#[test]
fn line_tables_get_the_linkage_names_of_defined_functions() {
    let dir = tempfile::tempdir().unwrap();
    let ll = dir.path().join("inl.ll");
    let source = ir_dir().join("../c/inlined/inl.cpp");
    let clang = Command::new("clang++-22")
        .args([
            "-O2",
            "-Xclang",
            "-disable-llvm-passes",
            "-gline-tables-only",
            "-S",
        ])
        .args(["-emit-llvm", "-o"])
        .arg(&ll)
        .arg(&source)
        .status()
        .expect("run clang++-22");
    assert!(clang.success());
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
    let output = Command::new("opt-22")
        .env_remove("KAGE_TOOL")
        .arg(format!("-load-pass-plugin={}", plugin_path().display()))
        .args(["-passes=kage-version-loops", "-S"])
        .arg(&ll)
        .output()
        .expect("run opt-22");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let named = String::from_utf8(output.stdout).unwrap();
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
