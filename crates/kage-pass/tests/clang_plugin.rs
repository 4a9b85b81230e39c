//! Loads the plugin into clang-22 itself (`-fpass-plugin`), at -O2 and at -O0: the pass must
//! run in both pipelines (OptimizerLast is invoked by the -O0 pipeline too) and produce an
//! object that calls the runtime.

mod support;

use std::process::Command;

const TINY_C: &str = r#"
int sum(const int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}
"#;

fn compile_and_list_symbols(opt_level: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("tiny.c");
    let object = dir.path().join("tiny.o");
    std::fs::write(&source, TINY_C).unwrap();
    let status = Command::new("clang-22")
        .arg(opt_level)
        .arg("-g")
        .arg(format!(
            "-fpass-plugin={}",
            support::plugin_path().display()
        ))
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .status()
        .expect("run clang-22");
    assert!(
        status.success(),
        "clang-22 {opt_level} with the plugin failed"
    );
    let nm = Command::new("llvm-nm-22")
        .arg(&object)
        .output()
        .expect("run llvm-nm-22");
    assert!(nm.status.success());
    String::from_utf8(nm.stdout).unwrap()
}

fn assert_instrumented(symbols: &str) {
    let has = |kind: &str, name: &str| {
        symbols.lines().any(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            fields.len() >= 2
                && fields[fields.len() - 2] == kind
                && fields[fields.len() - 1] == name
        })
    };
    for hook in [
        "__kage_load",
        "__kage_func_enter",
        "__kage_func_exit",
        "__kage_loop_iter",
        "__kage_register_module",
    ] {
        assert!(has("U", hook), "undefined {hook} expected in:\n{symbols}");
    }
    assert!(
        has("t", "__kage_module_ctor"),
        "local constructor expected in:\n{symbols}"
    );
    assert!(
        has("d", "__kage_regions"),
        "local region table expected in:\n{symbols}"
    );
}

#[test]
fn clang_o2_runs_the_pass() {
    assert_instrumented(&compile_and_list_symbols("-O2"));
}

#[test]
fn clang_o0_runs_the_pass() {
    assert_instrumented(&compile_and_list_symbols("-O0"));
}
